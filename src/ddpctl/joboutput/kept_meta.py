"""A kept job's ``meta.json``, read back as the types its readers expect.

The folder may hold a file an older ddpctl wrote, one edited by hand, or one whose values came from a hostile
job's output (its summary's rate): every key is checked against the type below and a value of another type
(a text where a number belongs, NaN, a 400-digit integer, deep nesting) is replaced by the key's default, so
``ps --all``, ``status`` and ``logs`` read any meta.json without failing. :func:`clean` is also applied
before a meta.json is written.
"""

from __future__ import annotations

import math

MAX_INT = 2**53  # an integer beyond this (a 400-digit one) is not a count or a time
MAX_TEXT = 4096  # characters of a text value
MAX_ITEMS = 4096  # entries of a mapping (containers, hosts, exit codes)
TB_KEYS = ("dir", "container", "host", "volume", "host_path", "kept")


def _int(v, low: int = 0) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and low <= v <= MAX_INT else None


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int) and abs(v) > MAX_INT:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _text(v) -> str | None:
    return v[:MAX_TEXT] if isinstance(v, str) else None


def _digits_key(k) -> bool:
    return isinstance(k, str) and k.isdigit() and len(k) <= 9


def _map(v, value) -> dict:
    if not isinstance(v, dict):
        return {}
    out = {}
    for k, x in list(v.items())[:MAX_ITEMS]:
        if _digits_key(k):
            y = value(x)
            if y is not None:
                out[k] = y
    return out


def _exit_code(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31 else None


def _tensorboard(v) -> dict | None:
    if not isinstance(v, dict) or not isinstance(v.get("dir"), str):
        return None
    out: dict = {k: _text(v.get(k)) for k in TB_KEYS}
    if out["container"] is None:
        out["container"] = ""
    if v.get("removed") is True:
        out["removed"] = True
    return out


def clean(raw) -> dict:
    """Meta as its readers expect it (see the module docstring); {} for anything but a JSON object."""
    if not isinstance(raw, dict):
        return {}
    state = raw.get("state") if raw.get("state") in ("running", "exited") else "exited"
    result = raw.get("result") if raw.get("result") in ("running", "succeeded", "failed", "stopped") else None
    restarts = _int(raw.get("restarts")) or 0
    return {
        "job": _text(raw.get("job")),
        "containers": {a: _map(m, _text) for a, m in _map(raw.get("containers"), lambda m: m).items()
                       if isinstance(m, dict)},
        "attempts": _int(raw.get("attempts"), 1) or restarts + 1,
        "restarts": restarts,
        "nodes": _int(raw.get("nodes")) or 0,
        "hosts": _map(raw.get("hosts"), _text),
        "exit_codes": _map(raw.get("exit_codes"), _exit_code),
        "state": state,
        "result": result,
        "world_size": _int(raw.get("world_size"), 1),
        "removed": raw.get("removed") is True,
        "started": _num(raw.get("started")),
        "ended": _num(raw.get("ended")),
        "duration_s": _num(raw.get("duration_s")),
        "final_samples_per_sec": _num(raw.get("final_samples_per_sec")),
        "records": _int(raw.get("records")) or 0,
        "rejected_records": _int(raw.get("rejected_records")) or 0,
        "tensorboard": _tensorboard(raw.get("tensorboard")),
    }
