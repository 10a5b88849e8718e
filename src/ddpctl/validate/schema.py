"""A small, strict JSON-Schema validator for the keyword subset of ddpctl's bundled schemas.

Why not the ``jsonschema`` package at run time: ddpctl's runtime dependencies are installed into every image
from an offline wheelhouse (``jsonschema`` would add four packages, one of them a compiled extension), and the
CRDs are OpenAPI v3 structural schemas whose Kubernetes meaning Draft 7 does not know: ``format: int32`` /
``int64`` ranges, ``x-kubernetes-int-or-string``, ``x-kubernetes-list-type: map|set`` uniqueness,
``x-kubernetes-preserve-unknown-fields``, ``nullable`` and the API server's pruning of ``null`` values, and
unknown fields as errors (``kubectl --validate=strict``). The subset below is what the bundled files use (a unit
test lists every keyword they contain and fails on a new one); ``tests/unit/test_validate_schema.py`` checks that
this validator agrees with the ``jsonschema`` reference implementation on Draft-7 semantics.

Keywords: ``$ref`` (local ``#/...``), ``type``, ``enum``, ``const``, ``properties``, ``patternProperties``,
``additionalProperties``, ``required``, ``minProperties``, ``maxProperties``, ``items``, ``minItems``,
``maxItems``, ``uniqueItems``, ``minLength``, ``maxLength``, ``pattern``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``oneOf``, ``anyOf``, ``allOf``, ``not``, ``if``/``then``/``else``,
``format`` (int32, int64),
``nullable`` and the ``x-kubernetes-*`` extensions above. Annotations (``description``, ``default``, ...) are
ignored; CEL rules (``x-kubernetes-validations``) are handled by :mod:`ddpctl.validate.k8s`.

Strict mode: an object whose schema lists ``properties`` (or ``patternProperties``) and says nothing about
``additionalProperties`` accepts no other key, unless ``x-kubernetes-preserve-unknown-fields`` is set.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from ddpctl.validate.jsontypes import (  # noqa: F401  (re-exported: the validators import them from here)
    INT_RANGES,
    KNOWN_KEYWORDS,
    Issue,
    Path,
    canon,
    compile_regex,
    is_type,
    json_type,
    key_hint,
    keywords,
    short,
)


class Validator:
    """``Validator(root_schema).iter_issues(document)``. ``kubernetes=True`` gives the API server's view of a
    CRD: ``null`` in a non-nullable field is pruned (not an error), as the API server does before validating."""

    def __init__(self, root: dict, *, strict: bool = True, kubernetes: bool = False) -> None:
        self.root = root
        self.strict = strict
        self.kubernetes = kubernetes

    def issues(self, instance: Any) -> list[Issue]:
        return list(self.iter_issues(instance))

    def iter_issues(self, instance: Any, schema: dict | bool | None = None, path: Path = ()) -> Iterator[Issue]:
        yield from self._check(instance, self.root if schema is None else schema, path)

    # ------------------------------------------------------------------------------------------ core

    def _resolve(self, ref: str) -> dict:
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref is supported, got {ref!r}")
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def _check(self, value: Any, schema: dict | bool, path: Path) -> Iterator[Issue]:
        if schema is True or schema == {}:
            return
        if schema is False:
            yield Issue(path, "is not allowed here")
            return
        if "$ref" in schema:
            yield from self._check(value, self._resolve(schema["$ref"]), path)
            if len(schema) == 1:
                return
        if isinstance(value, float) and not math.isfinite(value):
            yield Issue(path, f"{value!r} is not a finite number (NaN and infinity are not valid here)")
            return
        if value is None and (schema.get("nullable") or self.kubernetes):
            return  # nullable, or pruned by the API server (required fields: see _object)
        t = schema.get("type")
        if schema.get("x-kubernetes-int-or-string"):
            if not (is_type(value, "integer") or isinstance(value, str)):
                yield Issue(path, f"must be an integer or a string, got {json_type(value)} {short(value)}")
                return
        elif t is not None:
            types = t if isinstance(t, list) else [t]
            if not any(is_type(value, x) for x in types):
                yield Issue(path, f"must be {' or '.join(types)}, got {json_type(value)} {short(value)}")
                return
        if "enum" in schema and not any(canon(value) == canon(e) for e in schema["enum"]):
            allowed = ", ".join(str(e) for e in schema["enum"])
            yield Issue(path, f"must be one of {allowed}; got {short(value)}")
        if "const" in schema and canon(value) != canon(schema["const"]):
            yield Issue(path, f"must be {schema['const']!r}; got {short(value)}")
        if isinstance(value, dict):
            yield from self._object(value, schema, path)
        elif isinstance(value, list):
            yield from self._array(value, schema, path)
        elif isinstance(value, str):
            yield from self._string(value, schema, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield from self._number(value, schema, path)
        for key in ("allOf",):
            for sub in schema.get(key, ()):
                yield from self._check(value, sub, path)
        if "anyOf" in schema:
            yield from self._any_of(value, schema["anyOf"], path)
        if "oneOf" in schema:
            yield from self._one_of(value, schema["oneOf"], path)
        if "not" in schema and not self._first(value, schema["not"], path):
            yield Issue(path, "matches a form that is not allowed here")
        if "if" in schema:
            branch = schema.get("else" if self._first(value, schema["if"], path) else "then")
            if branch is not None:
                yield from self._check(value, branch, path)

    def _first(self, value: Any, schema: Any, path: Path) -> list[Issue]:
        return list(self._check(value, schema, path))

    def _branch_errors(self, value: Any, branches: list, path: Path) -> list[list[Issue]]:
        return [self._first(value, b, path) for b in branches]

    def _best(self, value: Any, branches: list, results: list[list[Issue]], path: Path) -> list[Issue]:
        """The errors of the branch the value most likely meant: one whose type it has, fewest errors."""
        typed = [r for b, r in zip(branches, results, strict=True) if not any(i.path == path and i.message.startswith("must be ")
                                                                  and ", got " in i.message for i in r)]
        if not typed:
            types: list[str] = []
            for b in branches:
                b = self._resolve(b["$ref"]) if isinstance(b, dict) and "$ref" in b else b
                t = b.get("type") if isinstance(b, dict) else None
                for x in (t if isinstance(t, list) else [t] if t else []):
                    if x not in types:
                        types.append(x)
            what = " or ".join(types) if types else "one of the allowed forms"
            return [Issue(path, f"must be {what}, got {json_type(value)} {short(value)}")]
        return min(typed, key=len)

    def _any_of(self, value: Any, branches: list, path: Path) -> Iterator[Issue]:
        results = self._branch_errors(value, branches, path)
        if any(not r for r in results):
            return
        yield from self._best(value, branches, results, path)

    def _one_of(self, value: Any, branches: list, path: Path) -> Iterator[Issue]:
        results = self._branch_errors(value, branches, path)
        ok = sum(1 for r in results if not r)
        if ok == 1:
            return
        if ok > 1:
            yield Issue(path, "matches more than one of the allowed forms")
            return
        yield from self._best(value, branches, results, path)

    # ----------------------------------------------------------------------------------- by type

    def _object(self, value: dict, schema: dict, path: Path) -> Iterator[Issue]:
        props = schema.get("properties")
        patterns = schema.get("patternProperties")
        extra = schema.get("additionalProperties")
        pruned = self.kubernetes
        for key in schema.get("required", ()):
            if key not in value or (pruned and value[key] is None):
                yield Issue(path + (key,), "is required")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            yield Issue(path, f"must have at least {schema['minProperties']} field(s)")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            yield Issue(path, f"must have at most {schema['maxProperties']} field(s)")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        strict_here = self.strict and not preserve and (props is not None or patterns is not None)
        for key, item in value.items():
            sub = path + (key,)
            matched = False
            if props is not None and key in props:
                matched = True
                yield from self._check(item, props[key], sub)
            if patterns:
                for pattern, sub_schema in patterns.items():
                    rx = compile_regex(pattern)
                    if rx is not None and isinstance(key, str) and rx.search(key):
                        matched = True
                        yield from self._check(item, sub_schema, sub)
            if matched:
                continue
            if isinstance(extra, dict):
                yield from self._check(item, extra, sub)
            elif extra is False or (extra is None and strict_here):
                yield Issue(sub, "is not a known field" + key_hint(key, props))

    def _array(self, value: list, schema: dict, path: Path) -> Iterator[Issue]:
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield Issue(path, f"must have at least {schema['minItems']} item(s), has {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield Issue(path, f"must have at most {schema['maxItems']} item(s), has {len(value)}")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                yield from self._check(item, items, path + (i,))
        elif isinstance(items, list):
            for i, (item, sub) in enumerate(zip(value, items, strict=False)):
                yield from self._check(item, sub, path + (i,))
        list_type = schema.get("x-kubernetes-list-type")
        if schema.get("uniqueItems") or list_type == "set":
            seen: set = set()
            for i, item in enumerate(value):
                c = canon(item)
                if c in seen:
                    yield Issue(path + (i,), f"duplicate item {short(item)}")
                seen.add(c)
        if list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys", ())
            seen_keys: set = set()
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                k = tuple(canon(item.get(key)) for key in keys)
                if k in seen_keys:
                    what = ", ".join(f"{key}={item.get(key)!r}" for key in keys)
                    yield Issue(path + (i,), f"duplicate entry ({what})")
                seen_keys.add(k)

    def _string(self, value: str, schema: dict, path: Path) -> Iterator[Issue]:
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield Issue(path, f"must be at least {schema['minLength']} character(s) long")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield Issue(path, f"must be at most {schema['maxLength']} characters long, is {len(value)}")
        if "pattern" in schema:
            rx = compile_regex(schema["pattern"])
            if rx is not None and not rx.search(value):
                yield Issue(path, f"{short(value)} does not match {schema['pattern']}")

    def _number(self, value: int | float, schema: dict, path: Path) -> Iterator[Issue]:
        if "minimum" in schema and value < schema["minimum"]:
            yield Issue(path, f"must be at least {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            yield Issue(path, f"must be at most {schema['maximum']}, got {value}")
        if "exclusiveMinimum" in schema and not isinstance(schema["exclusiveMinimum"], bool) \
                and value <= schema["exclusiveMinimum"]:
            yield Issue(path, f"must be greater than {schema['exclusiveMinimum']}, got {value}")
        if "exclusiveMaximum" in schema and not isinstance(schema["exclusiveMaximum"], bool) \
                and value >= schema["exclusiveMaximum"]:
            yield Issue(path, f"must be less than {schema['exclusiveMaximum']}, got {value}")
        fmt = schema.get("format")
        if fmt in INT_RANGES and is_type(value, "integer"):
            lo, hi = INT_RANGES[fmt]
            if not lo <= value <= hi:
                yield Issue(path, f"{value} does not fit in {fmt} ({lo}..{hi})")
