"""What the integration tests keep between runs on one machine, so a run does not redo the same slow setup:
the data roots of the test's own Docker daemons with the image they serve (gpu_dockerd.py, twohost.py,
ownengine.py) and the registries the CUDA image and the end-to-end workspace image are pushed to
(registry.kept). Each entry is only ever used by one test session at a time (an
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


def kept_data_root(entry: Entry | None) -> Path | None:
    """``entry``'s dockerd data root, now held by this session and with no network state (``forget_networks``),
    or None: no entry, caching off, or another session holds it (the caller then makes a fresh one)."""
    if entry is None or not entry.acquire():
        return None
    data = entry.path / "data"
    data.mkdir(parents=True, exist_ok=True)
    forget_networks(data)
    return data


def remove_leftovers(docker) -> None:
    """What a killed run left in a kept daemon (containers, then the volumes and networks nothing uses).
    ``docker(*args, check=..., timeout=...)`` runs the docker client against that daemon."""
    ids = docker("ps", "-aq", check=False, timeout=30).stdout.split()
    if ids:
        docker("rm", "-f", *ids, check=False, timeout=120)
    docker("volume", "prune", "-f", check=False, timeout=60)
    docker("network", "prune", "-f", check=False, timeout=60)


def image_id(docker, ref: str) -> str:
    """The id of ``ref`` in that daemon ("" when it has no such image)."""
    return docker("image", "inspect", "-f", "{{.Id}}", ref, check=False, timeout=60).stdout.strip()


def keep_only(docker, want: str) -> None:
    """Remove every image of a kept daemon but ``want`` (one image per entry, so it does not grow; after a load,
    so the layers a rebuilt image shares with the one before were not unpacked again)."""
    others = set(docker("images", "-aq", "--no-trunc", check=False, timeout=60).stdout.split()) - {want}
    if others:
        docker("rmi", "-f", *others, check=False, timeout=300)
