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
    ``distributed``; ``gpus`` GPUs visible to it (0: none asked for, a CPU run; None: all the host has).
    ``nodes`` > 1: that many torchrun agents on this host, ``nprocs / nodes`` processes and GPUs each, joined by
    a static TCP rendezvous on 127.0.0.1 (the two-node emulation); ``env``: extra environment for it."""

    name: str
    module: str
    args: tuple[str, ...]
    nprocs: int = 1
    distributed: bool = False
    gpus: int | None = 0
    nodes: int = 1
    env: tuple[tuple[str, str], ...] = ()


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
        """The program's last lines, joined, for an error message: what it printed is hostile, so anything not
        printable on one line is escaped and the whole is at most 400 characters."""
        from ddpctl.joboutput.visible import visible

        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return visible(" | ".join(x.strip() for x in text[-lines:])[-400:])[-400:]


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

    def argv(self, launch: Launch, node: int = 0, port: int = 0) -> list[str]:
        if launch.distributed and launch.nodes > 1:
            return [self.python, "-m", "torch.distributed.run", "--nnodes", str(launch.nodes), "--node-rank",
                    str(node), "--nproc-per-node", str(launch.nprocs // launch.nodes), "--master-addr", "127.0.0.1",
                    "--master-port", str(port), "-m", launch.module, *launch.args]
        if launch.distributed:
            return [self.python, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", str(launch.nprocs), "-m", launch.module, *launch.args]
        return [self.python, "-m", launch.module, *launch.args]

    def environ(self, launch: Launch, node: int = 0) -> dict[str, str]:
        env = dict(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(dict(launch.env))
        if launch.gpus:
            visible = env.get("CUDA_VISIBLE_DEVICES")
            ids = [x for x in visible.split(",") if x.strip()] if visible else [str(i) for i in range(launch.gpus)]
            per = launch.gpus // launch.nodes  # each emulated node sees its own share
            env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[: launch.gpus][node * per:(node + 1) * per])
        return env

    def describe(self) -> str:
        return f"host ({self.python})"

    def preflight(self) -> None:
        import shutil

        if shutil.which(self.python) is None:
            raise UsageError(f"--python {self.python} is not an executable", "pass the path of a Python with torch")

    def run(self, launch, *, timeout, log=None, tick=None):
        if launch.distributed and launch.nodes > 1:
            port = free_port()
            return run_processes([(self.argv(launch, i, port), self.environ(launch, i)) for i in range(launch.nodes)],
                                 timeout=timeout, log=log, tick=tick)
        return run_process(self.argv(launch), self.environ(launch), timeout=timeout, log=log, tick=tick)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_process(argv: list[str], env: dict[str, str], *, timeout: float, log: Optional[Path] = None,
                tick: Optional[Callable[[float], None]] = None) -> RunResult:
    """Run ``argv`` in its own process group; on timeout end that group (and only it)."""
    return run_processes([(argv, env)], timeout=timeout, log=log, tick=tick)


def run_processes(progs: list[tuple[list[str], dict[str, str]]], *, timeout: float, log: Optional[Path] = None,
                  tick: Optional[Callable[[float], None]] = None) -> RunResult:
    """Run the programs together, each in its own process group, until all have ended; on timeout end those
    groups (and only them). The result is the first program's output (node 0: rank 0's summary) with the
    others' appended after it; the exit code is the first non-zero one."""
    import tempfile

    start = time.monotonic()
    files, procs = [], []
    try:
        for argv, env in progs:
            out = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            files.append((out, err))
            try:
                procs.append(subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                              start_new_session=True))
            except OSError as exc:
                for p in procs:
                    _kill_group(p)
                return RunResult(127, "", f"cannot start {argv[0]}: {exc}", 0.0)
        timed_out = False
        try:
            while any(p.poll() is None for p in procs):
                time.sleep(0.5)
                elapsed = time.monotonic() - start
                if tick:
                    tick(elapsed)
                if elapsed > timeout:
                    timed_out = True
                    for p in procs:
                        _kill_group(p)
                    break
        except KeyboardInterrupt:
            for p in procs:
                _kill_group(p)
            raise
        seconds = time.monotonic() - start
        outs, errs = [], []
        for out, err in files:
            out.seek(0)
            err.seek(0)
            outs.append(out.read())
            errs.append(err.read())
    finally:
        for out, err in files:
            out.close()
            err.close()
    codes = [p.returncode for p in procs]
    code = 124 if timed_out else next((c for c in codes if c != 0), 0)
    sep = (lambda i: f"\n--- node {i}\n") if len(progs) > 1 else (lambda i: "")
    stdout = "".join((sep(i) if i else "") + o for i, o in enumerate(outs))
    stderr = "".join((sep(i) if i else "") + e for i, e in enumerate(errs))
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        head = "\n".join(f"$ {' '.join(argv)}" for argv, _ in progs)
        log.write_text(f"{head}\n--- exit {code} after {seconds:.1f} s"
                       f"{' (timed out)' if timed_out else ''}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                       encoding="utf-8")
    return RunResult(code, stdout, stderr, seconds, timed_out)


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
