"""One check for every record a job prints (a progress record, a summary line) before ddpctl uses a value of it.

A line is a record only when it is a JSON object of at most :data:`~ddpctl.joboutput.lines.MAX_LINE_BYTES`
that passes both:

- bounds, checked while parsing and after: no NaN or infinity, no float over 1e18 nor one written with more
  than :data:`MAX_NUMBER_CHARS` characters (refused before Python converts it), integers within +-2**53 (a
  400-digit integer is refused; one past Python's 4300 digits is no JSON to it), strings (keys too) of at most
  :data:`MAX_STRING` characters, nesting at most :data:`MAX_DEPTH` deep, at most :data:`MAX_VALUES` values;
- its schema, ``progress.schema.json`` or ``summary.schema.json`` (ddpctl's copies of ddp_train's, in
  :mod:`ddpctl.schemas`), with ddpctl's JSON-Schema validator: types, required keys, ``const``/``enum`` and
  ranges. Keys a schema does not list are allowed (writers may add keys) but bounded as above.

A line that looks like a record (a JSON object naming ``"progress"`` or ``"summary"``) and fails either is
:data:`REJECTED`: its reader keeps it as a plain output line and counts it; none of its values reaches a table,
a plot, the live line or the kept metadata.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_STRING = 4096
MAX_DEPTH = 8  # an object in an object ... : the record is depth 1
MAX_VALUES = 4096
MAX_NUMBER_CHARS = 32
MAX_INT = 2**53
MAX_FLOAT = 1e18
EVENTS = ("progress", "summary")


class Rejected(str):
    """Why a line that looked like a record is not one (a short reason, no text of the job's)."""


REJECTED = Rejected("not a valid record")


class _Bad(ValueError):
    pass


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Bad("a number of more than 32 characters")
    value = float(text)
    if not math.isfinite(value) or abs(value) > MAX_FLOAT:
        raise _Bad("a number out of range")
    return value


def _constant(text: str) -> Any:
    raise _Bad(f"{text} is not a JSON number")


def _bounded(obj: Any) -> str | None:
    """Why ``obj`` (parsed JSON) is outside the bounds, or None. Iterative: no recursion on deep input. Numbers
    were bounded while parsing (:func:`_int`, :func:`_float`); checked again here for values built otherwise."""
    stack = [(obj, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} deep"
        items = value.items() if type(value) is dict else enumerate(value)
        for key, item in items:
            seen += 1
            if type(key) is str and len(key) > MAX_STRING:
                return f"a key of more than {MAX_STRING} characters"
            t = type(item)
            if t is str:
                if len(item) > MAX_STRING:
                    return f"a string of more than {MAX_STRING} characters"
            elif t is dict or t is list:
                stack.append((item, depth + 1))
            elif t is int:
                if abs(item) > MAX_INT:
                    return "an integer beyond 2**53"
            elif t is float:
                if not math.isfinite(item) or abs(item) > MAX_FLOAT:
                    return "a number out of range"
        if seen > MAX_VALUES:
            return f"more than {MAX_VALUES} values"
    return None


def looks_like_record(text: str) -> bool:
    """Is ``text`` (a line without its rank prefix, stripped) a candidate record? Cheap: no parsing."""
    return text.startswith("{") and ('"progress"' in text or '"summary"' in text)


def check(text: str) -> tuple[str, dict] | Rejected | None:
    """(event, record) for a valid record; :class:`Rejected` for a line that looks like one and is not; None for
    any other line (plain output)."""
    if not looks_like_record(text):
        return None
    try:
        obj = json.loads(text, parse_float=_float, parse_constant=_constant)  # ints: bounded by _bounded
    except _Bad as exc:
        return Rejected(str(exc))
    except (ValueError, RecursionError):
        # a line naming "event" meant to be a record; other broken JSON is plain output
        return Rejected("not valid JSON") if '"event"' in text else None
    if not isinstance(obj, dict) or obj.get("event") not in EVENTS:
        return None  # JSON of some other kind: plain output
    why = _bounded(obj)
    if why is not None:
        return Rejected(why)
    event = obj["event"]
    why = _first_issue(event, obj)
    if why is not None:
        return Rejected(why[:120])
    _integers(obj, _schema(event))
    return event, obj


def _integers(obj: dict, schema: dict) -> None:
    """Integer fields written as 1.0 become 1 (the schema allows it; ddpctl's arithmetic and text want ints)."""
    ints, nested = _integer_keys(id(schema), schema)
    for key in ints:
        if type(obj.get(key)) is float:
            obj[key] = int(obj[key])
    for key, sub in nested:
        if type(obj.get(key)) is dict:
            _integers(obj[key], sub)


_INTEGER_KEYS: dict = {}


def _integer_keys(key: int, schema: dict) -> tuple[list[str], list[tuple[str, dict]]]:
    found = _INTEGER_KEYS.get(key)
    if found is None:
        props = schema.get("properties") or {}
        ints = [k for k, sub in props.items()
                if "integer" in (sub.get("type") if isinstance(sub.get("type"), list) else [sub.get("type")])]
        nested = [(k, sub) for k, sub in props.items() if isinstance(sub.get("properties"), dict)]
        found = _INTEGER_KEYS[key] = (ints, nested)
    return found


def _schema(event: str) -> dict:
    from ddpctl.schemas import record_schema

    return record_schema(event)


# The keywords the compiled check below knows; a schema with another one is checked by ddpctl.validate's
# Validator instead (the same answers, more slowly: tests/unit/test_record_check.py holds both to agree).
COMPILED_KEYWORDS = frozenset({"type", "const", "enum", "minimum", "maximum", "required", "properties",
                               "additionalProperties", "items", "$schema", "$id", "title", "description"})
_JSON_TYPE = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
              type(None): "null"}


def _type_ok(value: Any, types: frozenset) -> bool:
    """JSON Schema's type test (1.0 is an integer, True is not) for parsed JSON."""
    name = _JSON_TYPE.get(type(value))
    if name in types:
        return True
    if name == "integer":
        return "number" in types
    return name == "number" and "integer" in types and value.is_integer()


def _compile(schema: Any):
    """A function value -> None | issue text, for a schema of :data:`COMPILED_KEYWORDS` (else None)."""
    from ddpctl.validate.jsontypes import keywords

    if not isinstance(schema, dict) or not keywords(schema) <= COMPILED_KEYWORDS:
        return None
    types = schema.get("type")
    types = frozenset([types] if isinstance(types, str) else types) if types is not None else None
    props = {k: _compile(v) for k, v in (schema.get("properties") or {}).items()}
    items = _compile(schema["items"]) if isinstance(schema.get("items"), dict) else None
    if any(f is None for f in props.values()) or ("items" in schema and items is None):
        return None
    required = tuple(schema.get("required", ()))
    has_const, const = "const" in schema, schema.get("const")
    enum = schema.get("enum")
    low, high = schema.get("minimum"), schema.get("maximum")

    numeric = low is not None or high is not None
    leaf_keys = {"type", "minimum", "description"}
    sub_schemas = schema.get("properties") or {}
    leaves = [(k, frozenset([v["type"]] if isinstance(v["type"], str) else v["type"]), v.get("minimum"))
              for k, v in sub_schemas.items() if isinstance(v, dict) and "type" in v and set(v) <= leaf_keys]
    others = [(k, props[k]) for k in sub_schemas if k not in {leaf[0] for leaf in leaves}]

    def run(value: Any) -> str | None:
        t = type(value)
        if types is not None and _JSON_TYPE.get(t) not in types and not _type_ok(value, types):
            return f"must be {' or '.join(sorted(types))}, got {_JSON_TYPE.get(t, 'other')}"
        if has_const and (value != const or t is not type(const)):
            return f"must be {const!r}"
        if enum is not None and not any(value == e and t is type(e) for e in enum):
            return "must be one of " + ", ".join(map(str, enum))
        if numeric and (t is int or t is float):
            if low is not None and value < low:
                return f"must be at least {low}, got {value}"
            if high is not None and value > high:
                return f"must be at most {high}, got {value}"
        if t is dict:
            for key in required:
                if key not in value:
                    return f"{key} is required"
            for key, leaf_types, leaf_low in leaves:  # a type and a minimum: checked here, no call
                if key in value:
                    v = value[key]
                    vt = type(v)
                    if _JSON_TYPE.get(vt) not in leaf_types and not _type_ok(v, leaf_types):
                        return (f"{key} must be {' or '.join(sorted(leaf_types))}, "
                                f"got {_JSON_TYPE.get(vt, 'other')}")
                    if leaf_low is not None and (vt is int or vt is float) and v < leaf_low:
                        return f"{key} must be at least {leaf_low}, got {v}"
            for key, sub in others:
                if key in value:
                    why = sub(value[key])
                    if why is not None:
                        return f"{key} {why}" if not why.endswith("is required") else f"{key}.{why}"
        elif t is list and items is not None:
            for item in value:
                why = items(item)
                if why is not None:
                    return f"an item {why}"
        return None

    return run


_CHECKS: dict = {}


def _first_issue(event: str, obj: dict) -> str | None:
    """Why ``obj`` fails the schema of ``event`` (the first issue), or None."""
    run = _CHECKS.get(event)
    if run is None:
        run = _CHECKS[event] = _compile(_schema(event)) or _slow(event)
    return run(obj)


def _slow(event: str):
    from ddpctl.validate.schema import Validator

    validator = Validator(_schema(event), strict=False)

    def run(value: Any) -> str | None:
        issue = next(validator.iter_issues(value), None)
        if issue is None:
            return None
        where = ".".join(str(p) for p in issue.path[:3])
        return f"{where} {issue.message}" if where else issue.message

    return run
