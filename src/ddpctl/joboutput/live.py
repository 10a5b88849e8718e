"""The live progress line of an attached ``ddpctl up`` on a terminal: one line under the streamed rank lines,
redrawn after each of them (step/total, %, samples/s, ETA, restarts). The ranks' progress records feed it and are
never printed; without a terminal they are dropped, so the output is what it was before records existed."""

from __future__ import annotations

import time

from ddpctl.joboutput import records as rec_mod


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
        rank = rec.get("rank", 0)
        rp = self.ranks.setdefault(rank, rec_mod.RankProgress(rank))
        rp.records = (rp.records + [rec])[-2:]
        p = rec_mod.job_progress(self.ranks)
        total = f"/{p['total']}" if p["total"] else ""
        pct = f" ({p['percent']:.0f}%)" if p["percent"] is not None else ""
        rate = f"{p['samples_per_sec']:,.0f} samples/s" if p["samples_per_sec"] is not None else "- samples/s"
        self.text = (f"progress: step {p['step']}{total}{pct}, {rate}, ETA {rec_mod.format_eta(p['eta_s'])}, "
                     f"{self.restarts} restart(s)")
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
