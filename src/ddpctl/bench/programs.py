"""How ``ddpctl bench`` starts one program and waits for it: :class:`Launch` (what to run), :class:`RunResult`,
and the :class:`Runner` interface with :class:`HostRunner` (subprocesses of this host's Python, each in its own
process group). :class:`ddpctl.bench.docker.DockerRunner` runs the same launches in containers. Not to be
confused with :mod:`ddpctl.local.executor`, which applies a local-cluster plan.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ddpctl.errors import UsageError


@dataclass(frozen=True)
class Launch:
    """One program run: ``python -m MODULE ARGS``, under ``torchrun`` with ``nprocs`` processes when
    ``distributed``; ``gpus`` GPUs visible to it (0: none asked for, a CPU run; None: all the host has)."""

    name: str
    module: str
    args: tuple[str, ...]
    nprocs: int = 1
    distributed: bool = False
    gpus: int | None = 0


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 3) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return " | ".join(x.strip() for x in text[-lines:])


class Runner(ABC):
    """Starts one program run and waits for it."""

    runtime = "?"

    @abstractmethod
    def run(self, launch: Launch, *, timeout: float, log: Optional[Path] = None,
            tick: Optional[Callable[[float], None]] = None) -> RunResult: ...

    def describe(self) -> str:
        return self.runtime

    def preflight(self) -> None:  # noqa: B027 - optional hook, nothing to check by default
        """Raise a one-line DdpctlError when nothing could run (before any output is written)."""


class HostRunner(Runner):
    """Runs programs as subprocesses of this host's Python (``--python`` picks another interpreter)."""

    runtime = "host"

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.python = python or sys.executable
        self.env = dict(os.environ if env is None else env)

    def argv(self, launch: Launch) -> list[str]:
        if launch.distributed:
            return [self.python, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", str(launch.nprocs), "-m", launch.module, *launch.args]
        return [self.python, "-m", launch.module, *launch.args]

    def environ(self, launch: Launch) -> dict[str, str]:
        env = dict(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if launch.gpus:
            visible = env.get("CUDA_VISIBLE_DEVICES")
            ids = [x for x in visible.split(",") if x.strip()] if visible else [str(i) for i in range(launch.gpus)]
            env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[: launch.gpus])
        return env

    def describe(self) -> str:
        return f"host ({self.python})"

    def preflight(self) -> None:
        import shutil

        if shutil.which(self.python) is None:
            raise UsageError(f"--python {self.python} is not an executable", "pass the path of a Python with torch")

    def run(self, launch, *, timeout, log=None, tick=None):
        return run_process(self.argv(launch), self.environ(launch), timeout=timeout, log=log, tick=tick)


def run_process(argv: list[str], env: dict[str, str], *, timeout: float, log: Optional[Path] = None,
                tick: Optional[Callable[[float], None]] = None) -> RunResult:
    """Run ``argv`` in its own process group; on timeout end that group (and only it)."""
    import tempfile

    start = time.monotonic()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out, \
            tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        except OSError as exc:
            return RunResult(127, "", f"cannot start {argv[0]}: {exc}", 0.0)
        timed_out = False
        try:
            while True:
                try:
                    proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if tick:
                        tick(elapsed)
                    if elapsed > timeout:
                        timed_out = True
                        _kill_group(proc)
                        break
        except KeyboardInterrupt:
            _kill_group(proc)
            raise
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(argv)}\n--- exit {proc.returncode} after {seconds:.1f} s"
                       f"{' (timed out)' if timed_out else ''}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                       encoding="utf-8")
    return RunResult(proc.returncode if not timed_out else 124, stdout, stderr, seconds, timed_out)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
