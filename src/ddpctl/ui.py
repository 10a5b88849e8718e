"""Terminal output shared by the commands: ``Progress``, one live status line on a terminal (rewritten in
place), plain lines otherwise (logs, CI). ``images.progress.BuildProgress`` (image builds, pulls and pushes) and
``bench.progress.BenchProgress`` (the matrix) say what goes on it."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

CLEAR_LINE = "\r\x1b[K"


class Progress:
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.start_time = time.monotonic()

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def rewrite(self, text: str, *, fit: bool = False) -> None:
        """The live line becomes ``text`` (cut to the terminal's width with ``fit``); terminals only."""
        if fit:
            text = text[: shutil.get_terminal_size((100, 20)).columns - 1]
        self.write(CLEAR_LINE + text)

    def elapsed(self) -> float:
        return time.monotonic() - self.start_time
