"""The end of a worker, under ``ddp-train-launch``: the Python program run through
:mod:`ddp_train.launcher.worker` (its process group ended before interpreter teardown), and a bound on the time
from the end of a program to the exit of its process.

- :func:`wrap_command`: ``python [flags] SCRIPT|-m MODULE [args]`` after ``--no-python`` becomes ``python [flags]
  -m ddp_train.launcher.worker SCRIPT|-m MODULE [args]``; any other command (``ddp-train``, a shell script,
  ``python -c``) is left as it is. ``DDP_TRAIN_LAUNCH_WORKER=off`` leaves every command as it is.
- :class:`ExitWatch`: each wrapped worker notes the end of its program in a directory of the launcher's; a
  process still alive :data:`EXIT_TIMEOUT_ENV` seconds (default :data:`DEFAULT_EXIT_TIMEOUT`) later (a thread
  or an exit handler that never returns, a teardown that waits on a peer forever) is killed, and the launcher
  reports that rank as :data:`ddp_train.errors.EXIT_HUNG` with one line saying so. It also keeps each program's
  exit code by process id, with the time its program ended (:attr:`ExitWatch.programs_ended`): a rank whose
  program failed and which the agent then stopped with SIGTERM (a peer that lost the connection exited first) is
  reported with its program's code, not as stopped (a note older than the exit bound before the failure, a reused
  process id of an earlier restart, is not taken).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from ddp_train.errors import env_number
from ddp_train.launcher.worker import ENDED_DIR_ENV
from ddp_train.visible import visible

WORKER_MODULE = "ddp_train.launcher.worker"
WORKER_SWITCH_ENV = "DDP_TRAIN_LAUNCH_WORKER"  # "off": run the command exactly as given
EXIT_TIMEOUT_ENV = "DDP_TRAIN_EXIT_TIMEOUT"  # seconds from the end of a program to its process's exit
DEFAULT_EXIT_TIMEOUT = 300.0  # torchrun's own exit barrier waits as long for the other nodes
MAX_EXIT_TIMEOUT = 7 * 24 * 3600.0  # a week

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
# CPython's options that take a value as the next word; every other one takes none
_PYTHON_VALUE_OPTIONS = {"-W", "-X", "--check-hash-based-pycs"}
# torchrun flags that take no value (every other flag before the training command takes one)
TORCHRUN_NO_VALUE = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
                     "--virtual-local-rank", "--virtual_local_rank", "-h", "--help"}


def command_index(argv: list[str]) -> int | None:
    """Where the training command starts in torchrun's argv (None: there is none)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return i
        key = arg.split("=", 1)[0]
        i += 1 if "=" in arg or key in TORCHRUN_NO_VALUE else 2
    return None


def _python_target(cmd: list[str]) -> int | None:
    """In ``python [options] SCRIPT|-m MODULE ...``: the index of SCRIPT or of ``-m``; None for ``-c``, stdin,
    ``-i`` (interactive) or a command that is not Python."""
    if not cmd or not _PYTHON.fullmatch(os.path.basename(cmd[0])):
        return None
    i = 1
    while i < len(cmd):
        arg = cmd[i]
        if arg == "-m":
            return i if i + 1 < len(cmd) else None
        if arg == "-" or arg.startswith("-c") or arg == "--":
            return None
        if not arg.startswith("-"):
            return i
        if arg.startswith("--"):
            if arg in ("--help", "--version"):
                return None
            i += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
            continue
        letters = arg[1:]
        if "i" in letters or "c" in letters:
            return None
        if letters[-1] in ("W", "X") and len(letters) == 1:
            i += 2
        else:
            i += 1
    return None


def wrap_command(argv: list[str]) -> list[str]:
    """torchrun's argv with a Python worker run through :mod:`ddp_train.launcher.worker` (``--no-python`` only:
    without it torchrun builds the Python command itself)."""
    if os.environ.get(WORKER_SWITCH_ENV, "").lower() in ("off", "0", "no", "false"):
        return argv
    at = command_index(argv)
    if at is None or not any(a in ("--no-python", "--no_python") for a in argv[:at]):
        return argv
    cmd = argv[at:]
    target = _python_target(cmd)
    if target is None:
        return argv
    return [*argv[:at], *cmd[:target], "-m", WORKER_MODULE, *cmd[target:]]


def exit_timeout() -> float:
    """:data:`EXIT_TIMEOUT_ENV` in seconds (up to a week), :data:`DEFAULT_EXIT_TIMEOUT` when unset; a value that is
    not one raises a usage error (``TrainError``)."""
    value = env_number(EXIT_TIMEOUT_ENV, high=MAX_EXIT_TIMEOUT, fix=f"set it to the seconds a worker may take to "
                       f"exit after its program ended (default {DEFAULT_EXIT_TIMEOUT:g}) or unset it")
    return DEFAULT_EXIT_TIMEOUT if value is None else value


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]  # a zombie has exited already


class ExitWatch:
    """The launcher's side: a directory the workers note the end of their programs in, and a thread that kills a
    process still alive ``timeout`` seconds after its program ended."""

    def __init__(self, timeout: float | None = None, poll: float = 0.5) -> None:
        self.timeout = exit_timeout() if timeout is None else timeout
        self.poll = poll
        self.directory = tempfile.mkdtemp(prefix="ddp-train-launch-ends-")
        self.hung: dict[int, tuple[float, list[str]]] = {}  # rank -> (seconds it was given, threads alive at the end)
        # pid -> (its program's exit code, when the program ended): every note seen, alive or not
        self.programs_ended: dict[int, tuple[int, float]] = {}
        self._lock = threading.Lock()  # check() runs on the watch thread and, once more, at the end
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddp-train-launch-exit-watch", daemon=True)

    def start(self) -> ExitWatch:
        os.environ[ENDED_DIR_ENV] = self.directory  # the workers inherit it from torchrun's agent
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
        os.environ.pop(ENDED_DIR_ENV, None)
        shutil.rmtree(self.directory, ignore_errors=True)

    def check(self, now: float | None = None) -> None:
        """One look at the notes: keep each program's exit code, kill what outlived its bound."""
        with self._lock:
            self._check(time.time() if now is None else now)

    def _check(self, now: float) -> None:
        for path in Path(self.directory).glob("[0-9]*"):
            if path.suffix:
                continue
            try:
                note = json.loads(path.read_text()[:4096])
                pid, rank, ended = int(note["pid"]), (-1 if note["rank"] is None else int(note["rank"])), float(note["ended"])
                threads = [visible(t, limit=60) for t in note.get("threads", [])[:8]]
                code = int(note.get("code", 0)) & 0xFF
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if len(self.programs_ended) < 65536:
                self.programs_ended[pid] = (code, ended)
            start = _start_time(pid)
            if start is None or start != str(note.get("start", "")):
                path.unlink(missing_ok=True)  # it exited (the pid may since belong to another process)
                continue
            if now - ended >= self.timeout:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    continue
                self.hung[rank] = (self.timeout, threads)
                path.unlink(missing_ok=True)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - the watch must never take the launcher down, nor fail unsaid
                print(f"ddp-train-launch: warning: the exit watch stopped ({type(exc).__name__}: "
                      f"{visible(exc, limit=200)}); "
                      f"a worker that does not exit after its program ends is no longer bounded by "
                      f"{EXIT_TIMEOUT_ENV}", file=sys.stderr, flush=True)
                return

    def line(self, rank: int, exit_code: int) -> str:
        seconds, threads = self.hung[rank]
        still = f" (non-daemon threads still running at its end: {', '.join(threads)})" if threads else ""
        return (f"ddp-train-launch: rank {rank} failed (exit code {exit_code}, did not exit): its program ended but "
                f"the process was still running {seconds:g} s later{still}; killed it ({EXIT_TIMEOUT_ENV} sets "
                f"the bound)")
