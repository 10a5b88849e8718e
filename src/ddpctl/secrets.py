"""Secret-looking environment variable names, and masking their values in what ddpctl prints.

A name looks secret when one of its ``_``-separated words (or the whole name) is one of :data:`SECRET_WORDS`
(``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GITHUB_PAT`` ...). Whole words
only, so ``TOKENIZERS_PARALLELISM`` or ``KEYBOARD`` do not. It is a heuristic for *printing*: ``--dry-run``
masks such values, and rendering a literal value under such a name warns that it lands in the file in clear.
The way to keep a value out of every file is a secret reference (``secret_env`` / ``--secret-env``).
"""

from __future__ import annotations

import re
from typing import Mapping

SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "KEY", "APIKEY",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "PAT", "PRIVATE", "SESSION", "COOKIE", "SIGNATURE", "DSN",
})
MASK = "***"
_WORD = re.compile(r"[A-Za-z][a-z]*|[0-9]+")


def looks_secret(name: str) -> bool:
    """True for names such as ``HF_TOKEN``, ``apiKey``, ``WANDB_API_KEY``, ``DB_PASSWORD``."""
    words = set()
    for part in re.split(r"[_\-.]+", name):
        words.add(part.upper())
        words.update(w.upper() for w in _WORD.findall(part))  # camelCase parts: apiKey -> API, KEY
    return bool(words & SECRET_WORDS)


def mask_env(env: Mapping[str, object]) -> dict[str, object]:
    """``env`` with the values of secret-looking names replaced by :data:`MASK` (empty values stay empty)."""
    return {k: (MASK if looks_secret(k) and v not in (None, "") else v) for k, v in env.items()}
