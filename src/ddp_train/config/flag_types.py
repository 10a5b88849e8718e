"""The value types of ``ddp-train``'s numeric flags (argparse ``type=``): every number is finite (no ``nan``, no
``inf``) and within the range the run can use (what torch accepts, what a timer or a C++ int holds), so a bad
value is one usage line at parsing, never a traceback or a NaN later in the run."""

from __future__ import annotations

import argparse
import math

MAX_INT = 2**63 - 1  # torch's int64: the largest count a tensor or a C++ int64 holds
MAX_RANKS = 2**31 - 1  # torch.distributed's ranks and world size are C ints
MAX_SEED = 2**32 - 1  # the seeds derived from --seed (times 1,000,003 and more) still fit torch's 64-bit seed
WEEK_S = 7 * 24 * 3600.0  # the longest timeout or wait (timedelta and C++ milliseconds hold far more)
MAX_BUCKET_MB = 1 << 20  # 1 TiB: far past any model's gradients; bytes = MB x 2**20 must fit a C++ int64
MAX_LR = 1e6  # finite, and still finite after --scale-lr's factor


def shown(text: str) -> str:
    """The value as the message shows it: quoted, escaped (repr), at most 40 characters of it."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def _number(kind, text):
    try:
        v = kind(text)
    except ValueError:
        what = "an int" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {shown(text)}") from None
    if isinstance(v, float) and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {shown(text)}")
    return v


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) and not (v.is_integer() and abs(v) < 1e16) else str(int(v))


def ranged(kind, low, high, *, low_open: bool = False, high_open: bool = False, note: str = ""):
    """A converter to ``kind`` for values from ``low`` to ``high`` (``*_open``: that end excluded; ``high`` None: no
    end). The message names the range: both ends, or only the lower one while the upper is :data:`MAX_INT`."""
    lower = f"{'>' if low_open else '>='} {_fmt(low)}"
    upper = "" if high is None else f"{'<' if high_open else '<='} {_fmt(high)}"
    rule = lower if high in (None, MAX_INT) else f"{lower} and {upper}"
    note = f" ({note})" if note else ""

    def conv(text):
        v = _number(kind, text)
        if v < low or (low_open and v == low):
            raise argparse.ArgumentTypeError(f"must be {rule}{note}, got {shown(text)}")
        if high is not None and (v > high or (high_open and v == high)):
            raise argparse.ArgumentTypeError(f"must be {upper if high == MAX_INT else rule}{note}, got {shown(text)}")
        return v

    conv.__name__ = kind.__name__  # argparse names the type in its own messages
    return conv


def positive(kind, high=None):
    """> 0: ints up to ``high`` or :data:`MAX_INT`, finite floats up to ``high``."""
    return ranged(kind, 0, MAX_INT if high is None and kind is int else high, low_open=True)


def non_negative(kind, high=None):
    return ranged(kind, 0, MAX_INT if high is None and kind is int else high)


non_negative_int = non_negative(int)
timeout_seconds = ranged(float, 0.0, WEEK_S, low_open=True, note="seconds, at most a week")
