"""Numbers: integers in a range, CPUs, sizes in bytes, Kubernetes quantities, GPU device ids."""

from __future__ import annotations

import math
import re
from typing import Any

from ddpctl.rules.base import INT32_MAX, INT64_MAX, MAX_BYTES, MAX_CPUS, MAX_INT_DIGITS, RuleError

# ------------------------------------------------------------------------------------------- numbers


def integer(value: Any, *, lo: int | None = None, hi: int | None = None, what: str = "value") -> int:
    """An int, or a string of decimal digits (at most :data:`MAX_INT_DIGITS`), within ``lo``..``hi``."""
    if isinstance(value, bool):
        raise RuleError(f"{what} must be an integer, got a boolean {value!r}", "write a whole number")
    if isinstance(value, str):
        s = value.strip()
        if not re.fullmatch(r"-?\d{1,%d}" % MAX_INT_DIGITS, s):
            shown = s if len(s) <= 30 else s[:20] + f"... ({len(s)} characters)"
            raise RuleError(f"{what} must be an integer, got {shown!r}", "write a whole number")
        value = int(s)
    if isinstance(value, float) and value.is_integer() and math.isfinite(value) and abs(value) < 2**63:
        value = int(value)
    if not isinstance(value, int):
        raise RuleError(f"{what} must be an integer, got {value!r}", "write a whole number")
    if lo is not None and value < lo:
        raise RuleError(f"{what} must be at least {lo}, got {_short(value)}", f"use a value >= {lo}")
    if hi is not None and value > hi:
        raise RuleError(f"{what} must be at most {hi}, got {_short(value)}", f"use a value <= {hi}")
    return value


def _short(n: int) -> str:
    s = str(n) if abs(n) < 10**30 else f"a {len(str(abs(n)))}-digit number"
    return s


def int32(value: Any, *, lo: int = -(2**31), hi: int = INT32_MAX, what: str = "value") -> int:
    return integer(value, lo=max(lo, -(2**31)), hi=min(hi, INT32_MAX), what=what)


def int64(value: Any, *, lo: int = -(2**63), hi: int = INT64_MAX, what: str = "value") -> int:
    return integer(value, lo=max(lo, -(2**63)), hi=min(hi, INT64_MAX), what=what)


def cpus(value: Any, *, what: str = "cpus") -> float:
    """A finite, positive CPU count rounded to whole millicores (Kubernetes' precision), at least 0.001.

    Every target then agrees: compose ``cpus``, Docker ``nano_cpus``, Kubernetes ``cpu`` and Slurm
    ``--cpus-per-task`` (rounded up) all come from the rounded value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise RuleError(f"{what} must be a number, got {value[:30]!r}", "write a number such as 2 or 0.5") from None
        else:
            raise RuleError(f"{what} must be a number, got {type(value).__name__}", "write a number such as 2 or 0.5")
    if isinstance(value, int) and value > MAX_CPUS:
        raise RuleError(f"{what} must be at most {MAX_CPUS:g}, got {_short(value)}", f"use a value <= {MAX_CPUS:g}")
    value = float(value)
    if not math.isfinite(value):
        raise RuleError(f"{what} must be a finite number, got {value}", "write a number such as 2 or 0.5")
    if value > MAX_CPUS:
        raise RuleError(f"{what} must be at most {MAX_CPUS:g}, got {value:g}", f"use a value <= {MAX_CPUS:g}")
    millis = round(value * 1000)
    if millis < 1:
        raise RuleError(f"{what} must be at least 0.001 (one millicore), got {value:g}",
                        "use a positive value of at least 0.001")
    return millis / 1000


def cpu_quantity(value: float) -> str:
    """CPUs (already :func:`cpus`-checked) as a Kubernetes quantity: whole cores ``"2"``, else ``"2500m"``."""
    millis = round(cpus(value) * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


_SIZE_RE = re.compile(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([kmgtp]?)(i?b?)?\s*", re.IGNORECASE)


def size_bytes(value: Any, *, what: str = "size") -> int:
    """'16g', '16G', '16gb', '16Gi', '512m', 1024 -> bytes (binary units), 1 .. :data:`MAX_BYTES`."""
    fix = "write a size such as 16g, 512m or 2Gi"
    if isinstance(value, bool):
        raise RuleError(f"{what} must be a number of bytes or a string such as 16g, got {value!r}", fix)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise RuleError(f"{what} must be a whole number of bytes or a string such as 16g, got {value!r}", fix)
        if abs(value) > MAX_BYTES:
            raise RuleError(f"{what} {value!r} is larger than {MAX_BYTES} bytes", "use a smaller size")
        value = int(value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        m = _SIZE_RE.fullmatch(value)
        if not m:
            shown = value if len(value) <= 30 else value[:20] + "..."
            raise RuleError(f"{what} {shown!r} is not understood", fix)
        from decimal import Decimal

        number, unit = Decimal(m.group(1)), m.group(2).lower()
        result = int(number * 1024 ** "bkmgtp".index(unit or "b"))
    else:
        raise RuleError(f"{what} must be a string such as 16g, got {type(value).__name__}", fix)
    if not isinstance(result, int) or result <= 0:
        raise RuleError(f"{what} must be positive, got {value!r}", fix)
    if result > MAX_BYTES:
        raise RuleError(f"{what} {str(value)[:30]!r} is larger than {MAX_BYTES} bytes", "use a smaller size")
    return result


_QUANTITY_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?", re.ASCII)


def k8s_quantity(value: Any, *, what: str = "quantity") -> str:
    """The syntax of a Kubernetes resource quantity (``500m``, ``16Gi``, ``2``, ``1e3``), at most 64 characters."""
    s = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if s is None or len(s) > 64 or not _QUANTITY_RE.fullmatch(s):
        raise RuleError(f"{what} {value!r} is not a Kubernetes quantity", "write e.g. 500m, 2 or 16Gi")
    return s


# -------------------------------------------------------------------------------------------- devices

_GPU_UUID_RE = re.compile(r"(GPU|MIG)-[0-9a-fA-F][0-9a-fA-F/-]{0,126}")


def device_id(value: Any) -> str:
    """A GPU index (leading zeros dropped, so '00' and '0' are the same GPU) or a GPU-/MIG- UUID."""
    s = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if re.fullmatch(r"\d{1,4}", s):
        return str(int(s))
    if _GPU_UUID_RE.fullmatch(s):
        return s
    raise RuleError(f"{s[:40]!r} is not a GPU index or UUID", "write e.g. 0, 1 or GPU-6f3b...")
