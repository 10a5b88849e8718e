"""What the integration tests keep between runs on one machine, so a run does not redo the same slow setup:
the data roots of the second Docker daemons with the image they serve (gpu_dockerd.py) and the registry the
CUDA image is pushed to (test_cuda_image.py). Each entry is only ever used by one test session at a time (an
exclusive lock; a session that finds it held does the slow path in a fresh place instead), holds one image's
worth of data (it drops what an older image left), and can be removed at any time: the next run rebuilds it.

``DDPCTL_TEST_CACHE``: the folder (default ``/var/cache/ddpctl-tests`` as root, else
``~/.cache/ddpctl-tests``), or ``off`` for a run that starts from nothing (what a new machine's first run costs).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path


def root() -> Path | None:
    value = os.environ.get("DDPCTL_TEST_CACHE", "")
    if value == "off":
        return None
    if value:
        return Path(value)
    if os.geteuid() == 0:
        return Path("/var/cache/ddpctl-tests")
    return Path.home() / ".cache" / "ddpctl-tests"


class Entry:
    def __init__(self, name: str) -> None:
        base = root()
        self.path = base / name if base is not None else None
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Hold the entry for this session: False when caching is off or another session holds it."""
        if self.path is None:
            return False
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None


def forget_networks(data_root: Path) -> None:
    """Drop a kept dockerd data root's network state (libnetwork's store under ``network/``) before the daemon
    starts on it again: only the images are worth keeping, and a dockerd 20.10 in the machine's own network
    namespace that restarts on its stored default bridge deletes the host's ``docker0`` (seen here with the
    second dockerd of the GPU-request tests: ``--bridge=ddgpu0`` on the first start, docker0 gone on the second),
    which the shared engine needs for every container it starts."""
    shutil.rmtree(data_root / "network", ignore_errors=True)
