"""An attached ``ddpctl up`` run in the background whose output is read as it comes, so a test can act (kill a
node, restart or stop a Docker daemon) at a given training step; :class:`OnPty`, the same on a pseudo-terminal
(the live line's case)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
import time

from itest_helpers import DDPCTL


class Up:
    """An attached ``ddpctl up`` whose stdout is read line by line (to act at a training step)."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([DDPCTL, "up", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**env, "NO_COLOR": "1"})
        self.lines: list[str] = []
        self.times: list[float] = []  # time.monotonic() when each line came
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errs = threading.Thread(target=self._read_err, daemon=True)
        self._errs.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.times.append(time.monotonic())
            self.lines.append(line.rstrip("\n"))

    def _read_err(self) -> None:
        self.err = self.proc.stderr.read()

    def step(self) -> int:
        found = [int(m.group(1)) for ln in self.lines for m in [re.search(r"\(global (\d+)\)", ln)] if m]
        return max(found, default=0)

    def first_step_after_resume(self, t: float) -> float | None:
        """When the first training line came after the first 'resumed from' line after time ``t``."""
        resumed = False
        for when, ln in zip(self.times, self.lines, strict=False):
            if when > t and "ddp-train: resumed from " in ln:
                resumed = True
            elif resumed and re.search(r"\(global \d+\)", ln):
                return when
        return None

    def wait_step(self, n: int, timeout: float = 240) -> None:
        end = time.monotonic() + timeout
        while self.step() < n:
            assert self.proc.poll() is None, f"ddpctl up ended early:\n{self.out()}"
            assert time.monotonic() < end, f"step {n} not reached in {timeout} s:\n{self.out()}"
            time.sleep(0.2)

    def finish(self, timeout: float = 300) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        self._errs.join(10)
        return code

    def out(self) -> str:
        return "\n".join(self.lines[-30:]) + "\n--- stderr ---\n" + self.err


def no_traceback(up: Up) -> None:
    """No Python traceback, from the main flow or a thread, reached the user."""
    assert "Traceback" not in up.err and "Exception in thread" not in up.err, up.err


class OnPty:
    """``ddpctl up ARGS`` attached to a pseudo-terminal (its stdout and stderr), its output collected."""

    def __init__(self, *args: str, cwd=None):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([DDPCTL, "up", *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                                     cwd=cwd, env=dict(os.environ, NO_COLOR="1"), start_new_session=True)
        os.close(slave)
        self.master, self.chunks = master, []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")
