"""Size units: '16g' / '16Gi' / 1024 -> bytes, and bytes -> the docker ('16g') or Kubernetes ('16Gi') spelling."""

from __future__ import annotations

from typing import Any, Callable

from ddpctl import rules
from ddpctl.rules import RuleError


def parse_size(value: Any, fail: Callable[[str], Exception] | None = None) -> int:
    """'16g', '16G', '16gb', '16Gi', '512m', 1024 -> bytes (binary units); see :func:`ddpctl.rules.size_bytes`."""
    try:
        return rules.size_bytes(value)
    except RuleError as exc:
        if fail:
            raise fail(exc.problem) from None
        raise


def format_size(nbytes: int, style: str = "docker") -> str:
    """Bytes -> '16g' (docker/compose) or '16Gi' (Kubernetes quantity), exact, largest unit.

    Docker style stops at ``g``: the Docker SDK's ``parse_bytes`` (which docker-compose 1.29 and ``ddpctl up``
    go through) knows only b, k, m and g."""
    top = 4 if style == "k8s" else 3
    exp = 0
    while exp < top and nbytes % 1024 ** (exp + 1) == 0:
        exp += 1
    value = nbytes // 1024**exp
    if style == "k8s":
        return f"{value}{['', 'Ki', 'Mi', 'Gi', 'Ti'][exp]}"
    return f"{value}{'kmg'[exp - 1]}" if exp else str(value)


def docker_size(nbytes: int) -> str | int:
    """A size for docker-compose and the Docker SDK: '16g' when ``parse_bytes`` reads it back exactly (it goes
    through a float, exact up to 2**53 before the unit), else the number of bytes as an integer (taken as is)."""
    text = format_size(nbytes)
    mantissa = int(text.rstrip("kmg"))
    return text if mantissa <= 2**53 else nbytes
