"""Host paths (bind-mount sources) and container paths (mount targets)."""

from __future__ import annotations

import re
from typing import Any

from ddpctl.rules.base import MAX_PATH_LEN, RuleError, text

# --------------------------------------------------------------------------------------------- paths

_PATH_BAD = (":", ",")


def _path_common(path: Any, what: str) -> str:
    if not isinstance(path, str) or not path:
        raise RuleError(f"{what} must be a non-empty path", "give a path")
    text(path, what=what)
    if len(path) > MAX_PATH_LEN:
        raise RuleError(f"{what} is longer than {MAX_PATH_LEN} characters", "shorten it")
    for ch in _PATH_BAD:
        if ch in path:
            raise RuleError(f"{what} {path!r} contains {ch!r}, which compose, pyxis and apptainer --bind "
                            "read as a separator", "rename or symlink the directory to a path without ':' or ','")
    if any(part == ".." for part in path.split("/")):
        raise RuleError(f"{what} {path!r} contains a '..' component (Kubernetes rejects it in a hostPath)",
                        "write the path without '..'")
    return path


def host_path(path: Any, *, what: str = "host path") -> str:
    """A bind-mount source. Absolute (``/data``), home-relative (``~/data``) or relative (``./data``,
    ``data/x``); a relative path without a leading ``./`` gets one, so compose never reads it as a named volume.
    """
    path = _path_common(path, what)
    if path.startswith(("/", "~")) or path == "." or path.startswith("./"):
        return path
    return "./" + path


def is_relative_path(path: str) -> bool:
    """True when ``path`` (after :func:`host_path`) is resolved against a directory (``./x``, ``~/x``)."""
    return not path.startswith("/")


def container_path(path: Any, *, what: str = "volume target") -> str:
    """An absolute path inside the container, not ``/`` and not ``/dev/shm`` (ddpctl mounts /dev/shm)."""
    path = _path_common(path, what)
    if not path.startswith("/"):
        raise RuleError(f"{what} {path!r} is not an absolute path", "start it with /")
    norm = re.sub(r"/+", "/", path).rstrip("/") or "/"
    if norm == "/":
        raise RuleError(f"{what} must not be '/'", "mount the directory somewhere below /, e.g. /data")
    if norm == "/dev/shm" or norm.startswith("/dev/shm/"):
        raise RuleError(f"{what} {path!r} is /dev/shm, which ddpctl mounts itself",
                        "use --shm-size (or ipc: host) for shared memory, and mount data elsewhere")
    return norm
