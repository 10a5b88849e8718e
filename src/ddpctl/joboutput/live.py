"""The live progress line of an attached ``ddpctl up`` on a terminal: one line under the streamed rank lines,
redrawn after each of them (step/total, %, samples/s, ETA, restarts). The ranks' progress records feed it and are
never printed; without a terminal they are dropped, so the output is what it was before records existed."""

from __future__ import annotations

import math
import time

from ddpctl.joboutput import records as rec_mod
from ddpctl.joboutput.visible import visible

MAX_RANKS = 4096  # ranks the line follows; records of further ranks (a job inventing rank numbers) are left out


def consume(live: LiveLine | None, text: str) -> bool:
    """Is ``text`` (a node's raw output line) a progress record? It goes to ``live`` (if any), not to the output."""
    rec = rec_mod.parse_event(text, "progress")
    if rec is None:
        return False
    if live is not None:
        live.update(rec)
    return True


class LiveLine:
    """A file-like wrapper of a terminal: each write of whole lines clears the live line first and redraws it
    after."""

    def __init__(self, out, restarts: int = 0):
        self.out, self.restarts = out, restarts
        self.ranks: dict[int, rec_mod.RankProgress] = {}
        self.text = ""
        self.last_draw = 0.0

    @classmethod
    def on(cls, out, restarts: int = 0) -> LiveLine | None:
        try:
            return cls(out, restarts) if out.isatty() else None
        except (AttributeError, ValueError):
            return None

    def update(self, rec: dict) -> None:
        """Take one checked progress record (:func:`consume`); never raises on what the record says."""
        rank = rec.get("rank", 0)
        if rank not in self.ranks and len(self.ranks) >= MAX_RANKS:
            return
        rp = self.ranks.setdefault(rank, rec_mod.RankProgress(rank))
        rp.records = (rp.records + [rec])[-2:]
        try:
            self.text = visible(describe(rec_mod.job_progress(self.ranks), self.restarts))
        except (ArithmeticError, ValueError, TypeError, KeyError):  # a value no format takes: keep the last line
            return
        now = time.monotonic()
        if now - self.last_draw >= 0.2:
            self.out.write("\r\x1b[K" + self.text)
            self.out.flush()
            self.last_draw = now

    def write(self, s: str) -> None:
        self.out.write("\r\x1b[K" + s + (self.text if s.endswith("\n") else ""))

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self.text:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.text = ""


def _number(value, spec: str) -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return format(value, spec) if ok else "-"


def describe(p: dict | None, restarts: int) -> str:
    """The live line's text from :func:`ddpctl.joboutput.records.job_progress`; ``-`` for a value it lacks or
    that is not a finite number (NaN, infinity), a step below 0 shown as it is, with no percent."""
    if not p:
        return ""
    total = f"/{p['total']}" if p.get("total") else ""
    percent = p.get("percent")
    pct = f" ({_number(percent, '.0f')}%)" if isinstance(percent, (int, float)) and percent >= 0 else ""
    return (f"progress: step {p.get('step')}{total}{pct}, {_number(p.get('samples_per_sec'), ',.0f')} samples/s, "
            f"ETA {rec_mod.format_eta(p.get('eta_s'))}, {restarts} restart(s)")
