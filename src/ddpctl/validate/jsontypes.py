"""JSON values and schemas for :mod:`ddpctl.validate.schema`: the keyword list, JSON types, issue records and
small helpers the validators share (``short`` for messages, ``keywords`` to list a schema's keywords)."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

Path = tuple[Any, ...]  # keys (str) and list indices (int)

KNOWN_KEYWORDS = frozenset({
    "$ref", "type", "enum", "const", "properties", "patternProperties", "additionalProperties", "required",
    "minProperties", "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
    "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "oneOf", "anyOf", "allOf", "not",
    "format", "nullable",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-map-type",
    "x-kubernetes-validations",
    # annotations
    "$schema", "$id", "id", "title", "description", "default", "deprecated", "examples", "definitions", "$defs",
    "$comment",
})
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Issue:
    path: Path
    message: str


# bool before int: True is an int to Python, a boolean to JSON.
_JSON_TYPES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def json_type(value: Any) -> str:
    for cls, name in _JSON_TYPES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


def is_type(value: Any, t: str) -> bool:
    actual = json_type(value)
    if t == actual:
        return True
    if t == "number":
        return actual == "integer"
    if t == "integer":
        return actual == "number" and math.isfinite(value) and float(value).is_integer()
    return False


def short(value: Any, limit: int = 40) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else json_type(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=4096)
def compile_regex(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def canon(value: Any) -> Any:
    """A hashable form for uniqueness checks (1 and 1.0 are equal, True and 1 are not)."""
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, canon(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("a", tuple(canon(v) for v in value))
    if isinstance(value, bool):
        return ("b", value)
    return ("v", value)


def key_hint(key: Any, props: dict | None) -> str:
    if not props or not isinstance(key, str):
        return ""
    import difflib

    close = difflib.get_close_matches(key, list(props), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def keywords(schema: Any) -> set[str]:
    """Every keyword a schema uses (keys of schema objects, not of ``properties`` maps)."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                out.add(k)
                if k in ("properties", "patternProperties", "definitions", "$defs"):
                    for sub in v.values():
                        walk(sub)
                elif k in ("items", "additionalProperties", "not") and isinstance(v, dict):
                    walk(v)
                elif k in ("items", "oneOf", "anyOf", "allOf") and isinstance(v, list):
                    for sub in v:
                        walk(sub)
        elif isinstance(node, list):
            for sub in node:
                walk(sub)

    walk(schema)
    return out
