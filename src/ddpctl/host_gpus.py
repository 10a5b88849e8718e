"""This host's NVIDIA GPUs as ``nvidia-smi`` reports them: the one place ddpctl runs nvidia-smi (``ddpctl doctor``
runs the same queries through its probes, so its tests can fake them, and reads them with the parsers here).

Three readers, each tolerant of a host without a driver (None / 0 / ``{"present": False}``):
:func:`driver_version` (``ddpctl image check``), :func:`gpu_count` (``ddpctl up`` and the bench's Docker
runner: how many GPUs a job may ask for) and :func:`nvidia_smi` (the host side of the bench report's hardware
section: driver, GPUs, topology). The torch side (torch, CUDA, cuDNN, NCCL, GPUs as torch sees them) comes
from ``python -m ddp_train.sysinfo``; this module never imports torch.
"""

from __future__ import annotations

import re
import shutil
import subprocess

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``nvidia-smi topo -m`` underlines its header with terminal escapes, also into a pipe."""
    return _ANSI.sub("", text)


def _run(argv: list[str], timeout: float) -> str | None:
    """stdout of ``argv``, or None when it cannot run, times out or fails."""
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


# The two queries and how their output reads (also used by `ddpctl doctor`, which runs them through its probes).
DRIVER_QUERY = ["--query-gpu=driver_version", "--format=csv,noheader"]
GPU_LIST = ["-L"]


def parse_driver(out: str | None) -> str | None:
    """The driver version in DRIVER_QUERY's output (one line per GPU), or None."""
    lines = [x.strip() for x in (out or "").splitlines() if x.strip()]
    return lines[0] if lines else None


def parse_gpu_count(out: str | None) -> int:
    """How many GPUs GPU_LIST's output lists."""
    return sum(1 for x in (out or "").splitlines() if x.startswith("GPU "))


def driver_version(nvidia_smi: str | None = None) -> str | None:
    """The host's NVIDIA driver version, or None when there is none."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return None
    return parse_driver(_run([exe, *DRIVER_QUERY], 20))


def gpu_count(nvidia_smi: str | None = None) -> int:
    """How many GPUs ``nvidia-smi -L`` lists (0 without nvidia-smi)."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return 0
    return parse_gpu_count(_run([exe, *GPU_LIST], 20))


def nvidia_smi(timeout: float = 30.0) -> dict:
    """Driver version, GPU names and ``nvidia-smi topo -m``; ``{"present": False}`` without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"present": False}
    out: dict = {"present": True, "driver": None, "gpus": [], "topology": None}
    q = _run([exe, "--query-gpu=index,name,driver_version,memory.total,pcie.link.gen.current,"
                   "pcie.link.width.current", "--format=csv,noheader,nounits"], timeout)
    if q is not None:
        for line in q.strip().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4:
                continue
            out["driver"] = parts[2]
            out["gpus"].append({"index": parts[0], "name": parts[1], "memory_mib": parts[3],
                                "pcie": f"gen{parts[4]} x{parts[5]}" if len(parts) > 5 else None})
    topo = _run([exe, "topo", "-m"], timeout)
    if topo is not None:
        out["topology"] = strip_ansi(topo).rstrip()
    return out
