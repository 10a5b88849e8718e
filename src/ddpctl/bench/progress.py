"""Progress while the matrix runs: one live line on a terminal, plain lines otherwise (logs, CI)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._label = ""
        self._start = 0.0
        self._last_tick = 0.0

    def start(self, index: int, total: int, label: str) -> None:
        self._label = f"[{index}/{total}] {label}"
        self._start = time.monotonic()
        if self.tty:
            self._write(f"\r\033[K{self._label} ...")
        else:
            self._write(f"bench {self._label}: running\n")

    def tick(self, elapsed: float) -> None:
        """Called about twice a second by the runner while a program runs."""
        if self.tty:
            self._write(f"\r\033[K{self._label} ... {elapsed:5.0f} s")
        elif elapsed - self._last_tick >= 60:  # a heartbeat a minute in plain mode
            self._last_tick = elapsed
            self._write(f"bench {self._label}: still running ({elapsed:.0f} s)\n")

    def done(self, outcome: str) -> None:
        took = time.monotonic() - self._start
        self._last_tick = 0.0
        if self.tty:
            self._write(f"\r\033[K{self._label}: {outcome} ({took:.1f} s)\n")
        else:
            self._write(f"bench {self._label}: {outcome} ({took:.1f} s)\n")

    def note(self, text: str) -> None:
        self._write(("\r\033[K" if self.tty else "") + f"bench: {text}\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
