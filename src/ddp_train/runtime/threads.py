"""CPU threads per training process: OMP_NUM_THREADS and torch's intra-op threads.

The rule (the same as ddpctl's launch contract): max(1, CPUs available to this container or pod / training
processes on this node, counting every node that shares the host). ddpctl sets ``OMP_NUM_THREADS`` itself
where it knows the CPUs (``ddpctl up``, a CPU limit, Slurm); where it does not, it sets
``DDP_TRAIN_THREADS=auto`` (plus ``DDP_TRAIN_NODES_PER_HOST`` when nodes share a host) and this module decides
here, from the cgroup CPU quota and the CPU affinity of the process. ``auto`` overrides the
``OMP_NUM_THREADS=1`` that torchrun puts in place when it starts several processes. Without ``auto``, a set
``OMP_NUM_THREADS`` wins (the user's or ddpctl's); unset, the rule applies with the local process count.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

AUTO_ENV = "DDP_TRAIN_THREADS"
NODES_PER_HOST_ENV = "DDP_TRAIN_NODES_PER_HOST"


def cgroup_cpu_limit(root: str | os.PathLike = "/sys/fs/cgroup") -> float | None:
    """CPUs allowed by the cgroup CPU quota (v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), None when unlimited."""
    base = Path(root)
    try:
        quota, period = (base / "cpu.max").read_text().split()[:2]
        if quota == "max":
            return None
        return int(quota) / int(period) if int(period) > 0 else None
    except (OSError, ValueError):
        pass
    for sub in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        try:
            quota_us = int((base / sub / "cpu.cfs_quota_us").read_text())
            period_us = int((base / sub / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    return None


def available_cpus(root: str | os.PathLike = "/sys/fs/cgroup") -> float:
    """CPUs this process may use: its affinity, capped by the cgroup quota."""
    try:
        n: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root)
    return min(n, limit) if limit else n


def _positive_int(text: str | None) -> int | None:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def decide(env: dict | os._Environ | None = None, cpus: float | None = None) -> tuple[int, str]:
    """(threads, where the number came from: 'OMP_NUM_THREADS' or 'auto')."""
    env = os.environ if env is None else env
    given = _positive_int(env.get("OMP_NUM_THREADS"))
    if given and env.get(AUTO_ENV) != "auto":
        return given, "OMP_NUM_THREADS"
    procs = _positive_int(env.get("LOCAL_WORLD_SIZE")) or 1
    nodes = _positive_int(env.get(NODES_PER_HOST_ENV)) or 1
    cpus = available_cpus() if cpus is None else cpus
    return max(1, math.floor(cpus + 1e-9) // (procs * nodes)), "auto"


def apply(env: dict | os._Environ | None = None) -> int:
    """Decide, export ``OMP_NUM_THREADS`` (child processes, DataLoader workers) and set torch's threads."""
    import torch

    env = os.environ if env is None else env
    threads, _ = decide(env)
    env["OMP_NUM_THREADS"] = str(threads)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def _nproc_flag(argv: list[str]) -> str | None:
    """torchrun's ``--nproc-per-node`` value (``--flag V`` / ``--flag=V``) among its own flags, or None."""
    flags_only = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
                  "--virtual-local-rank", "--virtual_local_rank"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return None  # the workers' command begins: its flags are its own
        key, eq, value = arg.partition("=")
        if key in ("--nproc-per-node", "--nproc_per_node"):
            return value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        i += 1 if eq or key in flags_only else 2
    return None


def apply_for_launch(argv: list[str], env=None) -> None:
    """In ``ddp-train-launch``, before torchrun starts the workers: with ``DDP_TRAIN_THREADS=auto`` export
    ``OMP_NUM_THREADS`` by the rule for whatever command the workers run (torchrun keeps a set value instead of
    its own 1): this container's CPUs / (processes per node x nodes sharing the host)."""
    env = os.environ if env is None else env
    if env.get(AUTO_ENV) != "auto":
        return
    nproc = _nproc_flag(argv) or env.get("PET_NPROC_PER_NODE") or "1"
    threads, _ = decide({**env, "LOCAL_WORLD_SIZE": nproc if nproc.isdigit() else "1"})
    env["OMP_NUM_THREADS"] = str(threads)
