"""Kubernetes names (DNS-1123/1035 labels, subdomains, label keys and values) and tolerations."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ddpctl.rules.base import RuleError
from ddpctl.rules.numbers import int64

# ------------------------------------------------------------------------------------ Kubernetes names

_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def dns1123_label(value: Any, *, what: str = "name", max_len: int = 63) -> str:
    if not isinstance(value, str) or len(value) > max_len or not _DNS1123_LABEL_RE.fullmatch(value):
        raise RuleError(f"{what} {value!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
                        f"starting and ending with a letter or digit, at most {max_len} characters)",
                        "use e.g. 'team-a'")
    return value


def dns1123_subdomain(value: Any, *, what: str = "name") -> str:
    if (not isinstance(value, str) or len(value) > 253
            or not all(_DNS1123_LABEL_RE.fullmatch(p) for p in value.split("."))):
        raise RuleError(f"{what} {value!r} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                        "at most 253 characters)", "use e.g. 'high-priority'")
    return value


def dns1035_label(value: Any, *, what: str = "name", max_len: int = 63) -> str:
    if not isinstance(value, str) or len(value) > max_len or not DNS1035_LABEL_RE.fullmatch(value):
        raise RuleError(f"{what} {value!r} is not a DNS-1035 label (lowercase letters, digits and '-', "
                        f"starting with a letter, at most {max_len} characters)", "use e.g. 'resnet-ddp'")
    return value


def label_value(value: Any, *, what: str = "label value") -> str:
    if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME_RE.fullmatch(value)):
        raise RuleError(f"{what} {value!r} is not a Kubernetes label value (at most 63 letters, digits, '-', "
                        "'_' and '.', starting and ending with a letter or digit)", "use e.g. 'H100'")
    return value


def label_key(value: Any, *, what: str = "label key") -> str:
    if not isinstance(value, str):
        raise RuleError(f"{what} {value!r} is not a string", "write e.g. nvidia.com/gpu.product")
    prefix, _, name = value.rpartition("/")
    ok = bool(name) and len(name) <= 63 and _LABEL_NAME_RE.fullmatch(name) is not None
    if "/" in value:
        try:
            dns1123_subdomain(prefix)
        except RuleError:
            ok = False
    if not ok:
        raise RuleError(f"{what} {value!r} is not a Kubernetes label key ([prefix/]name: name at most 63 "
                        "letters, digits, '-', '_', '.'; prefix a DNS subdomain)", "write e.g. nvidia.com/gpu.product")
    return value


# ------------------------------------------------------------------------------------ Kubernetes misc

TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")


def toleration(item: Any) -> dict[str, Any]:
    """A core v1 Toleration as the API server validates it (ValidateTolerations)."""
    if not isinstance(item, Mapping):
        raise RuleError(f"toleration must be a mapping, got {type(item).__name__}",
                        "write key/operator/value/effect entries")
    extra = set(item) - set(TOLERATION_KEYS)
    if extra:
        raise RuleError(f"toleration has unknown key(s) {', '.join(sorted(map(str, extra)))}",
                        f"use {', '.join(TOLERATION_KEYS)}")
    out: dict[str, Any] = {}
    op = item.get("operator", "Equal")
    if op not in TOLERATION_OPERATORS:
        raise RuleError(f"toleration operator {op!r} is not Exists or Equal", "use Exists or Equal")
    key = item.get("key")
    if key is not None and key != "":
        out["key"] = label_key(key, what="toleration key")
    elif op != "Exists":
        raise RuleError("a toleration without a key must use operator Exists", "add a key or use operator: Exists")
    if "operator" in item:
        out["operator"] = op
    value = item.get("value")
    if value is not None and value != "":
        if op == "Exists":
            raise RuleError("a toleration with operator Exists must not have a value", "drop the value")
        out["value"] = label_value(str(value) if isinstance(value, (int, float)) and not isinstance(value, bool)
                                   else value, what="toleration value")
    effect = item.get("effect")
    if effect is not None and effect != "":
        if effect not in TOLERATION_EFFECTS:
            raise RuleError(f"toleration effect {effect!r} is not one of {', '.join(TOLERATION_EFFECTS)}",
                            f"use one of {', '.join(TOLERATION_EFFECTS)}")
        out["effect"] = effect
    if item.get("tolerationSeconds") is not None:
        if effect != "NoExecute":
            raise RuleError("tolerationSeconds needs effect NoExecute", "set effect: NoExecute or drop the seconds")
        out["tolerationSeconds"] = int64(item["tolerationSeconds"], what="tolerationSeconds")
    return out
