"""One build of a cached image at a time on this host: two ``ddpctl`` processes that need the same requirements
layer or workspace image (two jobs started at once from one project, a test suite on several workers) take turns
instead of building it twice.

Two builds of one requirements layer give two different image ids (its ``pip install`` writes times and compiled
files), and the workspace image's tag follows its parent's id: without a turn, the second build re-tags the layer
and the first process's next ``--bake`` finds a new parent and builds the workspace image again. With
:func:`held`, the second process waits, then finds the layer built and says it is cached.

The lock is an advisory ``flock`` on ``$XDG_CACHE_HOME/ddpctl/locks/<key>.lock`` (0700 folder, 0600 file, not
followed through a link), released when its holder ends, however it ends. The wait is bounded
(:data:`WAIT_S`), with a line while it waits. Where the lock cannot be opened (a read-only home, a link planted
for it) the build goes on without it, saying so; builds on another host against the same Docker Engine are not
serialised by it (they still build correct images, only twice).
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ddpctl.errors import EngineError

WAIT_S = 3600.0
POLL_S = 0.5
_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def cache_root() -> Path:
    """ddpctl's cache directory ($XDG_CACHE_HOME/ddpctl, default ~/.cache/ddpctl): the locks and the wheelhouses
    made for ``--base local``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ddpctl"


def lock_dir() -> Path:
    return cache_root() / "locks"


@contextmanager
def held(key: str, *, what: str, say: Callable[[str], None], wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold this host's lock ``key`` while the block builds ``what``; wait (at most ``wait_s``) for another holder."""
    if not _KEY.match(key):
        raise ValueError(f"lock key {key!r} is not a file name")
    folder = lock_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # a read-only home, a link planted for the file: build without taking turns
        say(f"note: cannot open the build lock in {folder} ({exc.strerror or exc}): building {what} without it "
            "(another ddpctl on this host may build it too); set XDG_CACHE_HOME to a writable folder")
        yield
        return
    try:
        _take(fd, what=what, say=say, wait_s=wait_s)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _take(fd: int, *, what: str, say: Callable[[str], None], wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if not said:
            say(f"another ddpctl on this host is building {what}: waiting for it (up to {wait_s:.0f} s)")
            said = True
        if time.monotonic() >= deadline:
            raise EngineError(f"another ddpctl on this host has been building {what} for over {wait_s:.0f} s",
                              "wait for that build to end (or stop it), then run this command again")
        time.sleep(POLL_S)
