"""``BuildProgress``: the build output of every image command (builds, pulls, pushes): one live status line
on a terminal, plain lines otherwise (CI logs)."""

from __future__ import annotations

from ddpctl.ui import CLEAR_LINE, Progress


class BuildProgress(Progress):
    def __init__(self, stream=None, tty: bool | None = None) -> None:
        super().__init__(stream, tty)
        self.step = ""

    def line(self, text: str) -> None:
        text = text.rstrip("\n")
        if not text.strip():
            return
        if not self.tty:
            print(text, file=self.stream, flush=True)
            return
        if text.startswith("Step "):
            if self.step:
                self.rewrite(f"\u2713 {self.step}\n")
            self.step = text
            self.rewrite(f"\u2026 {self.step}")
            return
        self.rewrite(f"\u2026 {self.step}  [{self.elapsed():5.0f}s] {text.strip()}", fit=True)

    def done(self, message: str) -> None:
        if self.tty:
            if self.step:
                self.rewrite(f"\u2713 {self.step}\n")
            self.stream.write(CLEAR_LINE)
        print(message, file=self.stream, flush=True)
