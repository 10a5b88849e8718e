"""What the benchmark tools share: the repository's paths, the environment of a GPU run (NVLink multicast off,
this checkout's ``src`` on PYTHONPATH, no pip install needed), a deadline that guards each stage, and running one
program with its whole output in a log file and a hard time limit.

    from benchmarks import benchlib            # from the repository root
    dl = benchlib.Deadline(540)                # the whole tool must end by then
    if dl.allows(120, "GPU tests"):
        rc = benchlib.run([...], log=out / "gpu-tests.log", timeout=dl.cap(200))
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# Lent multi-GPU machines: NVLink multicast stays off (a program that uses it can take the host's GPUs out of
# service for others); every program a tool starts gets these.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def gpu_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a run of this checkout: src/ first on PYTHONPATH, unbuffered output,
    multicast off, no blocking-wait left over from a user's shell."""
    env = dict(os.environ)
    env.pop("TORCH_NCCL_BLOCKING_WAIT", None)
    env.update(MULTICAST_OFF)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def use_src() -> None:
    """Import ddpctl / ddp_train from this checkout (a tool run as ``python benchmarks/x.py``)."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    os.environ.update(gpu_env())  # and for every program it starts (ddpctl bench's runs inherit os.environ)


class Deadline:
    """Seconds left of a tool's time; each stage asks before it starts and caps its own limit."""

    def __init__(self, seconds: float) -> None:
        self.t0 = time.monotonic()
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def allows(self, need: float, what: str) -> bool:
        """True when ``need`` seconds are left; otherwise says that ``what`` is skipped and why."""
        if self.left() >= need:
            return True
        say(f"skipped (time guard: {self.left():.0f} s left, needs {need:.0f} s): {what}")
        return False

    def cap(self, limit: float, reserve: float = 0.0) -> float:
        return max(1.0, min(limit, self.left() - reserve))


def say(msg: str, t0: list[float] = [time.monotonic()]) -> None:  # noqa: B006 - the tool's start, once
    print(f"[{time.monotonic() - t0[0]:5.0f}s] {msg}", flush=True)


def run(argv: list[str], *, log: Path, timeout: float, env: dict[str, str] | None = None,
        cwd: Path = ROOT) -> int:
    """Run ``argv`` in its own process group with stdout+stderr to ``log``; on timeout end the group. 124 =
    timed out."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        try:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=env or gpu_env(), cwd=cwd, start_new_session=True)
        except OSError as exc:
            f.write(f"cannot start: {exc}\n")
            return 127
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
            f.write(f"\n--- timed out after {timeout:.0f} s\n")
            return 124
