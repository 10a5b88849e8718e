"""Plain YAML scalars that some reader takes for a boolean, null or number where PyYAML sees text.

ddpctl reads and writes YAML with PyYAML (YAML 1.1). kubectl reads manifests with sigs.k8s.io/yaml, a fork of
go-yaml v2, which resolves more plain scalars: ``y``/``Y``/``n``/``N`` as booleans, and any scalar starting
with a digit, sign or dot that Go's ``strconv`` parses once the ``_`` are dropped (``1e-3``, ``.5``, ``+1``,
``0o17``, ``0x1F``, ``0b101``, ``08``, ``1_000``) as a number; YAML 1.2's core schema (Compose v2's go-yaml
v3) reads ``1e3`` and ``.inf`` as numbers too. :func:`kubectl_reads` is go-yaml v2's resolution, exactly (the
validator reports what kubectl would see); :func:`needs_quotes` is the writer's wider test (every such reader,
and the YAML 1.1 words in any case), so what ddpctl writes as text is text to all of them.
"""

from __future__ import annotations

import math
import re

_WORDS = {w: "a boolean" for w in ("y Y yes Yes YES on On ON true True TRUE n N no No NO off Off OFF false False "
                                    "FALSE").split()}
_WORDS.update({w: "null" for w in ("", "~", "null", "Null", "NULL")})
_WORDS.update({w: "a number" for w in (".nan", ".NaN", ".NAN")})
_WORDS.update({s + w: "a number" for s in ("", "+", "-") for w in (".inf", ".Inf", ".INF")})
_ANY_CASE_WORDS = frozenset(w.lower() for w in _WORDS if w and not w.startswith(("+", "-")))
# Go's strconv.ParseInt/ParseUint with base 0 (after go-yaml drops every '_'), and go-yaml's yamlStyleFloat,
# which is also YAML 1.2's core float without .inf/.nan.
_GO_INT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+(?:_[0-9]+)*)?")  # strconv.ParseFloat, from '.'
_CORE_SPECIAL = re.compile(r"[-+]?\.(?:inf|nan)", re.IGNORECASE)  # YAML 1.2 core's .inf/.nan, any case
_INT_BASES = {"x": 16, "b": 2, "o": 8}


def _go_int(text: str) -> int:
    digits = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    if len(digits) > 1 and digits[0] == "0":
        base = _INT_BASES.get(digits[1].lower())
        return sign * (int(digits[2:], base) if base else int(digits[1:], 8))
    return sign * int(digits)


def kubectl_reads(text: str) -> str | None:
    """What kubectl makes of ``text`` written as a plain scalar, when it is not a string: ``'a boolean'``,
    ``'null'``, ``'an integer'`` or ``'a number'``; None when it stays the string ``text``.

    go-yaml v2's rules: a fixed list of words (``y``, ``No``, ``OFF``, ``~``, ``.inf``...); from a ``.``, what
    Go parses as a float; from a digit or sign, with every ``_`` dropped, a signed 64-bit or unsigned integer in
    Go syntax (``0x``, ``0o``, ``0b``, a leading ``0`` for octal), else a YAML-style float that does not
    overflow. Timestamps stay text (kubectl converts to JSON).
    """
    if text in _WORDS:
        return _WORDS[text]
    head = text[:1]
    if head == ".":
        if _GO_DOT_FLOAT.fullmatch(text) and math.isfinite(float(text.replace("_", ""))):
            return "a number"
    elif head and head in "+-0123456789":
        plain = text.replace("_", "")
        if len(plain) <= 70 and _GO_INT.fullmatch(plain):  # 70: past 2**64 in any base
            value = _go_int(plain)
            if -(2**63) <= value < 2**63 or (plain[0] not in "+-" and value < 2**64):
                return "an integer"
        if _FLOAT.fullmatch(plain) and math.isfinite(float(plain)):
            return "a number"
    return None


def needs_quotes(text: str) -> bool:
    """Whether ``text`` must be quoted to be read back as text by kubectl (go-yaml v2), a YAML 1.2 core-schema
    reader or a YAML 1.1 reader taking its words in any case (``yEs``). YAML 1.1's own forms (``0022``,
    ``1:30``, ``2001-12-14``) are PyYAML's resolver's: its dumper quotes them already."""
    number_like = text.replace("_", "") if text[:1] in tuple("+-.0123456789") else text  # '_' as go-yaml, anywhere
    return (kubectl_reads(text) is not None or text.lower() in _ANY_CASE_WORDS
            or bool(_FLOAT.fullmatch(number_like) or _CORE_SPECIAL.fullmatch(text)))
