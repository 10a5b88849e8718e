"""RuleError, the input limits, and the rules for any text and for a user command."""

from __future__ import annotations

import re
from typing import Any

from ddpctl.errors import SpecError


class RuleError(SpecError):
    """A value broke a rule. ``problem`` describes the value (no key); callers prefix the key and location."""


# --------------------------------------------------------------------------------------------- limits

MAX_SPEC_BYTES = 1024 * 1024  # a job spec file; real ones are a few hundred bytes
MAX_YAML_NODES = 20_000  # scalars + collections after alias expansion
MAX_YAML_DEPTH = 32
MAX_SCALAR_CHARS = 64 * 1024
MAX_ENV_ENTRIES = 1000
MAX_INT_DIGITS = 20
MAX_BYTES = 2**63 - 1  # Docker and Kubernetes keep sizes in a signed 64-bit integer
MAX_CPUS = 100_000.0
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_PATH_LEN = 4096
MAX_IMAGE_LEN = 4096


# ----------------------------------------------------------------------------------------------- text

# C0 controls except \t and \n (checked separately), DEL, C1 controls (U+0085 NEL among them), the Unicode
# line/paragraph separators and BOM: YAML and shells read these back as something else (a space, a newline).
_BAD_CHARS_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]")


def text(value: str, *, allow_newline: bool = False, what: str = "value") -> str:
    """Any user string that reaches a manifest or script: printable, one line unless ``allow_newline``."""
    if not isinstance(value, str):
        raise RuleError(f"{what} must be a string, got {type(value).__name__}", "write a string")
    if len(value) > MAX_SCALAR_CHARS:
        raise RuleError(f"{what} is {len(value)} characters long (more than {MAX_SCALAR_CHARS})", "shorten it")
    m = _BAD_CHARS_RE.search(value)
    if m:
        raise RuleError(f"{what} contains the control or line-break character U+{ord(m.group()):04X}",
                        "remove it (write plain text)")
    if not allow_newline and "\n" in value:
        raise RuleError(f"{what} must not contain a newline", "write it on one line")
    return value


# -------------------------------------------------------------------------------------------- command


def command(words: Any) -> tuple[str, ...]:
    """A user command: at least one word, each :func:`text`, the first not an option (``-...``).

    torchrun parses words before ``--no-python``'s program as its own flags; ddpctl puts the user command
    after ``--no-python``, but a first word such as ``--node-rank=5`` would still be read by the launcher.
    """
    if not isinstance(words, (list, tuple)) or not words:
        raise RuleError("command must not be empty", "give a command such as ['python', 'train.py']")
    out = tuple(text(w, what="command word") for w in words)
    if out[0].startswith("-"):
        raise RuleError(f"command starts with {out[0]!r}, which the launcher would read as its own option",
                        "start the command with a program (e.g. python train.py); set the topology with "
                        "--nodes, --nproc-per-node and --port")
    return out
