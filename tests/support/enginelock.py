"""The engine lock of the test run (see tests/conftest.py): a readers-writer lock across the run's processes.

``flock`` on ``engine`` in the run's lock directory, shared or exclusive, plus a ``gate`` that an exclusive
request holds while it waits, so that new shared holders queue behind it instead of starving it. A process
never waits for the gate while it holds the engine lock (it lets go first), so two exclusive requests cannot
deadlock. Imported as a plain module (tests/support is on sys.path once tests/conftest.py is loaded), so every
conftest of the suite shares one lock object per process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

LOCKS_ENV = "PYTEST_ENGINE_LOCKS"


class EngineLock:
    def __init__(self, directory: Path) -> None:
        self.fd = os.open(directory / "engine", os.O_RDWR | os.O_CREAT, 0o600)
        self.gate = os.open(directory / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        self.mode: int | None = None

    def _take(self, mode: int) -> None:
        if mode == fcntl.LOCK_EX and self.mode == fcntl.LOCK_EX:
            return  # held already (consecutive exclusive tests keep it)
        if self.mode is not None:
            self.release()
        fcntl.flock(self.gate, fcntl.LOCK_EX)  # waits while an exclusive request is pending
        try:
            if mode == fcntl.LOCK_SH:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
            fcntl.flock(self.fd, mode)
        finally:
            if mode == fcntl.LOCK_EX:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        self.mode = mode

    def shared(self) -> None:
        self._take(fcntl.LOCK_SH)

    def exclusive(self) -> None:
        self._take(fcntl.LOCK_EX)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.mode = None

    @contextlib.contextmanager
    def exclusively(self):
        """Exclusive for the block, then back to what this process held before (a downgrade never waits)."""
        before = self.mode
        if before != fcntl.LOCK_EX:
            self.exclusive()
        try:
            yield
        finally:
            if before == fcntl.LOCK_SH:
                fcntl.flock(self.fd, fcntl.LOCK_SH)
                self.mode = before
            elif before is None:
                self.release()


_lock: EngineLock | None = None


def engine_lock() -> EngineLock:
    """This process's handle on the run's lock (a private directory when no run made one: nothing to share)."""
    global _lock
    if _lock is None:
        directory = os.environ.get(LOCKS_ENV)
        if not directory:
            directory = tempfile.mkdtemp(prefix="ddpctl-test-locks-")
            os.environ[LOCKS_ENV] = directory
        _lock = EngineLock(Path(directory))
    return _lock
