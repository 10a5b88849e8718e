"""What the training side sees: torch, CUDA, cuDNN, NCCL versions, GPUs, CPUs. Prints one JSON line.

``python -m ddp_train.tools.sysinfo`` -- used by ``ddpctl bench`` for its hardware section (ddpctl itself never
imports torch, so it asks this program, on the host or in the container that will run the benchmark).
"""

from __future__ import annotations

import json
import os
import platform
import sys


def collect() -> dict:
    import torch

    info: dict = {
        "event": "sysinfo",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": None,
        "nccl": None,
        "cuda_available": torch.cuda.is_available(),
        "gpu_count": 0,
        "gpus": [],
        "source": source(),
    }
    if torch.backends.cudnn.is_available():
        info["cudnn"] = str(torch.backends.cudnn.version())
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - a build without NCCL
            pass
        info["gpu_count"] = torch.cuda.device_count()
        for i in range(info["gpu_count"]):
            p = torch.cuda.get_device_properties(i)
            info["gpus"].append({
                "index": i,
                "name": p.name,
                "memory_gb": round(p.total_memory / 1e9, 1),
                "capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
            })
    return info


def source() -> str:
    """12 hex digits of a SHA-256 over this ddp_train package's Python and JSON files (relative paths and
    contents, sorted), or ``unknown`` where they cannot be read: which trainer code a benchmark ran (ddpctl bench
    records it with each call)."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    try:
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    except (OSError, ValueError):
        return "unknown"
    return digest.hexdigest()[:12]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def main() -> int:
    print(json.dumps(collect()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
