"""Kubernetes value rules (ddpctl.rules' rules as messages, quantities, names) and ObjectMeta, for the
manifest validator (:mod:`ddpctl.validate.k8s`)."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterator

from ddpctl import rules
from ddpctl.validate.schema import Issue, Path, json_type, short

# The value rules are ddpctl.rules' (one copy for the spec layer and the validator), turned into messages.

# Kubernetes' own env-name rule (IsEnvVarName, Kubernetes <= 1.33) accepts '-' and '.', which the spec rule
# (rules.env_name, POSIX names, safe in a shell script) does not: a hand-written manifest may use them.
ENV_NAME_K8S = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3),
        "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
        "E": Decimal(10**18)}


def _message(rule: Callable[..., Any]) -> Callable[[Any], str | None]:
    """A ``rules`` function as 'None when valid, else the problem'."""
    def check(value: Any) -> str | None:
        try:
            rule(value)
        except rules.RuleError as exc:
            return exc.problem
        return None

    return check


dns1123_label = _message(rules.dns1123_label)
dns1123_subdomain = _message(rules.dns1123_subdomain)
dns1035_label = _message(rules.dns1035_label)
qualified_name = _message(rules.label_key)
label_value = _message(rules.label_value)


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity (``16Gi``, ``500m``, ``1e3``, 2) as a Decimal, or None if it is not one
    (the syntax is :func:`ddpctl.rules.k8s_quantity`)."""
    if isinstance(value, float) and math.isfinite(value):
        return Decimal(repr(value))
    try:
        text = rules.k8s_quantity(value)
    except rules.RuleError:
        return None
    try:
        if text[-2:] in _BIN:
            return Decimal(text[:-2]) * _BIN[text[-2:]]
        if text[-1] in _DEC:
            return Decimal(text[:-1]) * _DEC[text[-1]]
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - excluded by the syntax rule
        return None


# ------------------------------------------------------------------------------------ ObjectMeta

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "labels", "annotations", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers",
    "managedFields", "selfLink",
})
MAX_ANNOTATIONS_BYTES = 256 * 1024


def string_map_issues(value: Any, path: Path, key_rule: Callable[[str], str | None],
                value_rule: Callable[[str], str | None] | None) -> Iterator[Issue]:
    if not isinstance(value, dict):
        if value is not None:
            yield Issue(path, f"must be a mapping, got {json_type(value)}")
        return
    for k, v in value.items():
        problem = key_rule(k)
        if problem:
            yield Issue(path + (k,), f"key {problem}")
        if not isinstance(v, str):
            yield Issue(path + (k,), f"must be a string, got {json_type(v)} {short(v)} (quote it)")
        elif value_rule is not None:
            problem = value_rule(v)
            if problem:
                yield Issue(path + (k,), problem)


def object_meta(meta: Any, path: Path, *, top: bool, name_rule: Callable[[str], str | None] | None = None,
                ) -> Iterator[Issue]:
    if not isinstance(meta, dict):
        if top or meta is not None:
            yield Issue(path, f"must be a mapping, got {json_type(meta)}")
        return
    for key in meta:
        if key not in OBJECT_META_FIELDS:
            yield Issue(path + (key,), "is not a known field of ObjectMeta")
    name = meta.get("name")
    if top and not name and not meta.get("generateName"):
        yield Issue(path + ("name",), "is required")
    for key in ("name", "generateName", "namespace"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            yield Issue(path + (key,), f"must be a string, got {json_type(meta[key])}")
    if isinstance(name, str) and name and top:
        problem = (name_rule or dns1123_subdomain)(name)
        if problem:
            yield Issue(path + ("name",), problem)
    ns = meta.get("namespace")
    if isinstance(ns, str) and top:
        problem = dns1123_label(ns)
        if problem:
            yield Issue(path + ("namespace",), problem)
    yield from string_map_issues(meta.get("labels"), path + ("labels",), qualified_name, label_value)
    annotations = meta.get("annotations")
    yield from string_map_issues(annotations, path + ("annotations",), qualified_name, None)
    if isinstance(annotations, dict):
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS_BYTES:
            yield Issue(path + ("annotations",), f"total size {size} exceeds {MAX_ANNOTATIONS_BYTES} bytes")
