"""Secret-looking environment variable names, and masking their values in what ddpctl prints.

A name looks secret when one of its ``_``-separated words (or the whole name) is one of :data:`SECRET_WORDS`
(``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``GITHUB_PAT`` ...). Whole words
only, so ``TOKENIZERS_PARALLELISM`` or ``KEYBOARD`` do not. It is a heuristic for *printing*: ``--dry-run``
masks such values, and rendering a literal value under such a name warns that it lands in the file in clear.
The way to keep a value out of every file is a secret reference (``secret_env`` / ``--secret-env``,
:class:`SecretEnv`), parsed here so that the spec layer keeps one copy of its syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ddpctl.rules.hosts import MASK, mask_url_passwords  # noqa: F401 - the rules mask URLs too: one copy there

SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "KEY", "APIKEY",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "PAT", "PRIVATE", "SESSION", "COOKIE", "SIGNATURE", "DSN",
    "PWD", "JWT", "BEARER", "OAUTH", "APITOKEN", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "WEBHOOK", "SASL",
})
# a word ending in one of these is a secret too (PGPASSWORD, GITHUBTOKEN, MYSECRET)
_SECRET_ENDINGS = ("TOKEN", "PASSWORD", "PASSWD", "SECRET", "APIKEY")
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working directory
FROM_ENV = "<secret: from the environment of ddpctl up>"  # a secret reference in a dry run
_WORD = re.compile(r"[A-Za-z][a-z]*|[0-9]+")


def looks_secret(name: str) -> bool:
    """True for names such as ``HF_TOKEN``, ``apiKey``, ``WANDB_API_KEY``, ``DB_PASSWORD``."""
    if name.upper() in _NOT_SECRET:
        return False
    words = set()
    for part in re.split(r"[_\-.]+", name):
        words.add(part.upper())
        words.update(w.upper() for w in _WORD.findall(part))  # camelCase parts: apiKey -> API, KEY
    return bool(words & SECRET_WORDS) or any(w.endswith(_SECRET_ENDINGS) for w in words)


def mask_env(env: Mapping[str, object]) -> dict[str, object]:
    """``env`` with the values of secret-looking names replaced by :data:`MASK` (empty values stay empty), and
    the password of a URL in any other value masked (``DATABASE_URL=postgres://u:***@db/x``)."""
    return {k: (MASK if looks_secret(k) and v not in (None, "", FROM_ENV)
                else mask_url_passwords(v) if isinstance(v, str) else v) for k, v in env.items()}


# ------------------------------------------------------------------------------------ secret references


@dataclass(frozen=True)
class SecretEnv:
    """An env variable whose value never appears in a spec, a rendered file or a dry run.

    ``secret``/``key`` name a Kubernetes Secret (``valueFrom.secretKeyRef``); compose takes the value from the
    environment of docker-compose (or its ``.env`` file), ``ddpctl up`` from its own environment when it starts
    the containers, Slurm from the environment ``sbatch`` was called from.
    """

    name: str
    secret: str | None = None  # Kubernetes Secret name; None: no Kubernetes reference
    key: str | None = None  # key in the Secret; None: the env name

    @property
    def secret_key(self) -> str:
        return self.key or self.name

    def __str__(self) -> str:
        if self.secret is None:
            return self.name
        return f"{self.name}={self.secret}" + (f":{self.key}" if self.key else "")


_SECRET_KEY_RE = re.compile(r"[-._a-zA-Z0-9]+")
SYNTAX = "NAME[=SECRET[:KEY]]"


def secret_key(value: Any, *, what: str = "secret key") -> str:
    """A key of a Kubernetes Secret or ConfigMap: letters, digits, '-', '_', '.', at most 253 characters.
    The refusal does not show the key: in a secret reference it may be a value typed in the wrong place."""
    from ddpctl.rules import RuleError

    if not isinstance(value, str) or len(value) > 253 or not _SECRET_KEY_RE.fullmatch(value):
        raise RuleError(f"{what} is not a valid key (letters, digits, '-', '_' or '.', at most 253; "
                        "it is not shown)", "use e.g. 'token'")
    return value


def parse_ref(name: Any, ref: Any) -> SecretEnv:
    """One entry: ``name`` and its reference ``SECRET[:KEY]`` (or None / "" for no Kubernetes Secret)."""
    from ddpctl import rules

    name = rules.user_env_name(name)
    if ref is None or ref == "":
        return SecretEnv(name)
    # Never show the reference: a value typed in its place (HF_TOKEN=hf_...) must not reach an error line.
    where = f"secret reference {name}=..."
    if isinstance(ref, dict):
        if set(ref) - {"secret", "key"} or "secret" not in ref:
            raise rules.RuleError(f"{where} must have 'secret' (and optionally 'key') and no other keys",
                                  f"write {name}: SECRET[:KEY]")
        secret, key = ref.get("secret"), ref.get("key")
    elif isinstance(ref, str):
        secret, colon, key = ref.partition(":")
        if colon and not key:
            raise rules.RuleError(f"{where} has an empty key after ':' (the reference is not shown)",
                                  f"write {name}=SECRET:KEY, or {name}=SECRET for the key {name}")
        key = key or None
    else:
        raise rules.RuleError(f"{where} must be SECRET[:KEY], got {type(ref).__name__}",
                              f"write {name}: SECRET[:KEY]")
    parts = ("the part after '='", "the part after ':'") if isinstance(ref, str) else ("'secret'", "'key'")
    try:
        secret = rules.dns1123_subdomain(secret, what="Kubernetes Secret name")
    except rules.RuleError:
        raise rules.RuleError(f"{where}: {parts[0]} must be the name of a Kubernetes Secret, a DNS-1123 "
                              "subdomain (lowercase letters, digits, '-' and '.'; the value is not shown)",
                              f"write {name}=SECRET[:KEY] with the Secret's name (e.g. {name}=my-secret:token); "
                              "a secret's value goes in the environment or the Secret, never in the spec") from None
    if key is not None:
        secret_key(key, what=f"{where}: {parts[1]}")
    return SecretEnv(name, secret, key)


def parse(value: Any) -> tuple[SecretEnv, ...]:
    """``{NAME: SECRET[:KEY] | {secret, key} | null}`` or ``["NAME[=SECRET[:KEY]]", ...]``; a name given twice
    is refused, in the list form as in the mapping form (a flag overrides the file: :func:`merge`)."""
    from ddpctl.rules import RuleError

    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for item in value:
            if not isinstance(item, str) or not item:  # not shown: a mapping item may hold a value
                what = "empty" if item == "" else f"a {type(item).__name__}"
                raise RuleError(f"secret_env entry is {what}, not {SYNTAX}", "write e.g. HF_TOKEN=hf-token:token")
            name, _, ref = item.partition("=")
            pairs.append((name, ref))
    else:
        raise RuleError(f"secret_env must be a mapping or a list of {SYNTAX}", "write e.g. HF_TOKEN: hf-token:token")
    out: dict[str, SecretEnv] = {}
    for name, ref in pairs:
        entry = parse_ref(name, ref)
        if entry.name in out:
            raise RuleError(f"secret_env gives {entry.name} twice", "give each variable once")
        out[entry.name] = entry
    return tuple(out.values())


def merge(file_value: Any, flags: list[Any]) -> Any:
    """The file's ``secret_env`` with ``--secret-env`` flags added or overriding per name (checked later); a
    name given twice by the flags is refused."""
    if all(isinstance(f, str) for f in flags):
        names = once([f.partition("=")[0] for f in flags], "--secret-env")
        if isinstance(file_value, list):
            return [e for e in file_value if not (isinstance(e, str) and e.partition("=")[0] in names)] + list(flags)
    if isinstance(file_value, dict) and all(isinstance(f, str) for f in flags):
        merged = dict(file_value)
        for flag in flags:
            name, _, ref = flag.partition("=")
            merged.pop(name, None)
            merged[name] = ref or None
        return merged
    if isinstance(file_value, list):
        return file_value + list(flags)
    return list(flags)


def once(names: list, flag: str) -> set:
    """The names given by repeated ``flag`` flags; a name given twice is refused (as a key twice in a file)."""
    seen: set = set()
    for name in names:
        if name in seen:
            from ddpctl.errors import SpecError
            from ddpctl.rules import shown_name

            shown = shown_name(name) if isinstance(name, str) else repr(name)
            raise SpecError(f"{flag} gives {shown} twice", f"give each variable once ({flag} overrides the file)")
        seen.add(name)
    return seen
