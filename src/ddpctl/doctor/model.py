"""What doctor works with: the options, the probes interface, one check's result."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

TARGETS = ("local", "compose", "k8s", "slurm")

CONTAINERS = ("none", "pyxis", "apptainer")

HOOK = "nvidia-container-runtime-hook"

CRDS = {"PyTorchJob": "pytorchjobs.kubeflow.org", "TrainJob": "trainjobs.trainer.kubeflow.org"}

STACK_MIN = 64 * 1024**2  # NVIDIA's recommended stack limit (bytes), also what ddpctl gives containers

# /dev/shm a DataLoader needs: each worker keeps prefetch_factor (2) batches in shared memory; 128 MiB is a
# batch of 128 3x224x224 float32 images (77 MB) rounded up.
SHM_PER_WORKER_BATCH = 128 * 1024**2

PREFETCH = 2

NOT_A_NIC = re.compile(r"^(lo|docker\d*|veth.*|br-.*|virbr.*|cni.*|flannel.*|cali.*|tunl.*|kube-.*)$")

@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return text + (f"; fix: {self.fix}" if self.fix and self.status != "ok" else "")

@dataclass(frozen=True)
class Options:
    target: str = "local"
    nodes: int = 1
    gpus_per_node: int = 0
    nproc_per_node: int = 0  # 0: gpus_per_node, or 1 on CPU
    workers: int = 4  # DataLoader workers per process
    port: int = 29500
    network: str = "bridge"  # local/compose: bridge | host
    image: str | None = None
    partition: str | None = None  # slurm
    container: str = "none"  # slurm: none | pyxis | apptainer
    checkpoint_dir: str | None = None  # the directory mounted at /checkpoints (default: the job's volume)
    checkpoint_size: int | None = None  # bytes of one checkpoint, when known
    keep_checkpoints: int = 3  # ddp-train --keep-checkpoints

    @property
    def procs(self) -> int:
        return self.nproc_per_node or self.gpus_per_node or 1

@dataclass
class Probes:
    """What the checks may ask of the machine. The defaults are the real machine (see :func:`host_probes`)."""

    which: Callable[[str], str | None]
    run: Callable[[list[str]], tuple[int, str, str]]  # (exit code, stdout, stderr); 127 when not runnable
    docker: Callable[[], dict]  # {"version": {...}, "info": {...}}; raises ProbeError when unreachable
    image_labels: Callable[[str], dict | None]  # labels of a local image, None when absent
    shm_bytes: Callable[[], int | None]
    rlimit: Callable[[str], tuple[int, int]]  # 'memlock'|'stack' -> (soft, hard); -1 = unlimited
    port_free: Callable[[int], bool]
    listdir: Callable[[str], list[str] | None]
    read: Callable[[str], str | None]
    env: dict[str, str] = field(default_factory=dict)
    free_bytes: Callable[[str], int | None] | None = None  # bytes free to a user at a path

class ProbeError(Exception):
    pass


