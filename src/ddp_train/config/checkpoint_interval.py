"""``--checkpoint-interval``: when to save besides epoch ends, by steps and/or time."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointInterval:
    """When to save besides epoch ends: every ``steps`` optimizer steps and/or every ``seconds`` of wall time."""

    steps: int = 0  # 0: no step cadence
    seconds: float = 0.0  # 0: no time cadence

    def __bool__(self):
        return bool(self.steps or self.seconds)

    def describe(self) -> str:
        parts = ([f"every {self.steps} steps"] if self.steps else []) + \
            ([f"every {_fmt_seconds(self.seconds)}"] if self.seconds else [])
        return " or ".join(parts) if parts else "off"


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")
INTERVAL_HELP = "STEPS (200), a DURATION (30s, 5m, 1h30m) or both, STEPS,DURATION (500,10m); off: none"


def _fmt_seconds(sec: float) -> str:
    if sec >= 60 and sec % 60 == 0:
        return f"{int(sec // 60)} min"
    return f"{sec:g} s"


def parse_interval(text: str) -> CheckpointInterval:
    """``--checkpoint-interval``: ``200`` steps, ``30s`` / ``5m`` / ``1h30m`` of time, ``500,10m`` both, ``off``."""
    t = text.strip().lower().replace(" ", "")
    if t in ("off", "0", "none"):
        return CheckpointInterval()
    steps, seconds = 0, 0.0
    for part in t.split(","):
        if part.isdecimal():  # int() reads every decimal digit (isdigit() would take "²" too)
            if steps:
                raise argparse.ArgumentTypeError(f"{text!r} gives the steps twice; write STEPS,DURATION")
            steps = int(part)
            if steps <= 0:
                raise argparse.ArgumentTypeError(f"{text!r}: the steps must be > 0")
            continue
        m = _DURATION.match(part)
        if not part or not m or not any(m.groups()):
            raise argparse.ArgumentTypeError(f"{text!r} is not {INTERVAL_HELP}")
        if seconds:
            raise argparse.ArgumentTypeError(f"{text!r} gives the time twice; write STEPS,DURATION")
        h, mi, se = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + se
        if seconds <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: the time must be > 0")
        if not math.isfinite(seconds):
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: the time must be a finite duration")
    return CheckpointInterval(steps, seconds)
