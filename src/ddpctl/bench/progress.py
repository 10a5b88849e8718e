"""``BenchProgress``: progress while the matrix runs, on ``ui.Progress``'s live line (plain lines otherwise:
logs, CI)."""

from __future__ import annotations

import time
from typing import TextIO

from ddpctl.ui import CLEAR_LINE, Progress


class BenchProgress(Progress):
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        super().__init__(stream, tty)
        self.label = ""
        self.started = 0.0
        self.last_tick = 0.0

    def start(self, index: int, total: int, label: str) -> None:
        self.label = f"[{index}/{total}] {label}"
        self.started = time.monotonic()
        if self.tty:
            self.rewrite(f"{self.label} ...")
        else:
            self.write(f"bench {self.label}: running\n")

    def tick(self, elapsed: float) -> None:
        """Called about twice a second by the runner while a program runs."""
        if self.tty:
            self.rewrite(f"{self.label} ... {elapsed:5.0f} s")
        elif elapsed - self.last_tick >= 60:  # a heartbeat a minute in plain mode
            self.last_tick = elapsed
            self.write(f"bench {self.label}: still running ({elapsed:.0f} s)\n")

    def done(self, outcome: str) -> None:
        took = time.monotonic() - self.started
        self.last_tick = 0.0
        if self.tty:
            self.rewrite(f"{self.label}: {outcome} ({took:.1f} s)\n")
        else:
            self.write(f"bench {self.label}: {outcome} ({took:.1f} s)\n")

    def note(self, text: str) -> None:
        self.write((CLEAR_LINE if self.tty else "") + f"bench: {text}\n")
