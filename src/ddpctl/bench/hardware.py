"""The host side of the hardware section: what ``nvidia-smi`` says (driver, GPUs, topology).

The torch side (torch, CUDA, cuDNN, NCCL, GPUs as torch sees them, CPUs) comes from
``python -m ddp_train.sysinfo`` through the executor; this module never imports torch.
"""

from __future__ import annotations

import re
import shutil
import subprocess

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``nvidia-smi topo -m`` underlines its header with terminal escapes, also into a pipe."""
    return _ANSI.sub("", text)


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


def _run(argv: list[str], timeout: float) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None
