"""The run's output paths (--output-dir, --metrics-file, --tensorboard, --profile-dir) checked while the flags are
parsed, before anything is created or trained: a path that cannot be used is one usage error (exit 2) at once,
not a traceback, a half-written metrics file or a failed checkpoint after the run has trained. Every rank checks
them before it joins the job, so all stop alike. Nothing is created here."""

from __future__ import annotations

import os

from ddp_train.errors import EXIT_USAGE, TrainError
from ddp_train.visible import bounded

# flag -> (what it names, whether that is a directory)
OUTPUTS = (("--output-dir", "output_dir", True), ("--metrics-file", "metrics_file", False),
           ("--tensorboard", "tensorboard", True), ("--profile-dir", "profile_dir", True))


def problem(path: str, *, directory: bool) -> str | None:
    """Why ``path`` cannot be written as a directory (or a file), or None: it is one that can, or it can be
    created (the nearest existing path above it is a writable directory)."""
    p = os.path.abspath(path)
    if os.path.lexists(p) and not os.path.exists(p):
        return "is a symbolic link to nothing"
    if os.path.exists(p):
        if directory != os.path.isdir(p):
            return "is a file, not a directory" if directory else "is a directory, not a file"
        if not os.access(p, os.W_OK | (os.X_OK if directory else 0)):
            return "is not writable"
        return None
    above = os.path.dirname(p)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return f"cannot be created: {bounded(above, 300)} is a file, not a directory"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"cannot be created: {bounded(above, 300)} is not writable"
    return None


def check(args) -> None:
    """Raise a one-line usage error for the first output path of ``args`` (the parsed flags) that cannot be
    written."""
    for flag, name, directory in OUTPUTS:
        path = getattr(args, name)
        why = path and problem(path, directory=directory)
        if why:
            kind = "a directory" if directory else "a file"
            raise TrainError(f"{flag} {bounded(path, 300)} {why}; pass {kind} this process can write (or create)",
                             EXIT_USAGE)
