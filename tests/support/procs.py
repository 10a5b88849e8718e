"""Ending the processes a test started without waiting forever (imported as a plain module: tests/support is on sys.path
once tests/conftest.py is loaded)."""

from __future__ import annotations

import os
import signal
import subprocess

DRAIN = 60  # seconds to read what a process that has ended (or was killed) left in its output pipes


def drain(p: subprocess.Popen, timeout: float = DRAIN) -> tuple[str, str]:
    """The rest of ``p``'s output once it has ended or been killed. ``communicate()`` alone waits for the pipes to
    close, which a child that outlives ``p`` (an ssh, a docker CLI, a torchrun worker in another session) may
    never do: past ``timeout`` this returns what it has, with a line that says why the rest is missing."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        held = f"\n(output cut: a child of pid {p.pid} held its pipes open {timeout:.0f} s after it ended)"
        return (_text(exc.stdout), _text(exc.stderr) + held)


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL ``p`` and every process of its process group (``p`` started with ``start_new_session=True``)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        p.kill()


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
