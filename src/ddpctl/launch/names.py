"""The launch contract's constants and records, node and network names, labels, the master address and the user command."""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl import __version__
from ddpctl.spec import JobSpec

# Labels on everything ddpctl creates; `ps`, `logs` and `down` find resources by them.
LABEL_JOB = "ddpctl.job"

LABEL_NODE_RANK = "ddpctl.node-rank"

LABEL_VERSION = "ddpctl.version"

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"

MANAGED_BY = "ddpctl"


def job_label(job: str) -> str:
    """The label filter that finds a job's containers, networks and volumes."""
    return f"{LABEL_JOB}={job}"

CONTAINER_WORKDIR = "/workspace"  # where `workdir` is mounted in containers

TRAINJOB_MASTER_PORT = 29500  # fixed by the Trainer v2 torch plugin

EXIT_CODE_LAUNCHER = "ddp-train-launch"  # torchrun + rank-prefixed output + the workers' exit code (ddp_train.launcher.run)

STACK_ULIMIT = 67108864  # bytes; NVIDIA's recommended container stack size

# What the Trainer v2 torch plugin injects into the trainer container (torch.go L110-225); its webhook rejects
# them in trainer.env. One copy: the trainjob renderer, the validator and the operator emulation in tests/ read it.
PET_VARS = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")

class ShellExpr(str):
    """A word that must reach the shell unquoted because it expands a variable (Slurm scripts)."""

@dataclass(frozen=True)
class GpuRequest:
    """GPUs for one node: a count, or specific host device ids."""

    count: int = 0
    device_ids: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return not self.count and not self.device_ids

@dataclass(frozen=True)
class NodeLaunch:
    """What one node (container) of a local/compose job runs."""

    rank: int
    name: str  # container and host name
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    gpus: GpuRequest
    labels: tuple[tuple[str, str], ...]

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


# ------------------------------------------------------------------------------------------ naming


def node_name(spec: JobSpec, rank: int) -> str:
    """Container / compose service / host name of node ``rank``."""
    return f"{spec.name}-node-{rank}"


def network_name(spec: JobSpec) -> str:
    return f"{spec.name}-net"


def pytorchjob_pod_name(spec: JobSpec, rank: int) -> str:
    """Pod (and headless Service) name the training operator gives node ``rank``."""
    return f"{spec.name}-master-0" if rank == 0 else f"{spec.name}-worker-{rank - 1}"


def trainjob_master_addr(spec: JobSpec) -> str:
    """PET_MASTER_ADDR the Trainer v2 torch plugin injects: JobSet pod hostname plus subdomain."""
    return f"{spec.name}-node-0-0.{spec.name}"


def labels(spec: JobSpec, rank: int | None = None) -> dict[str, str]:
    out = {LABEL_JOB: spec.name, LABEL_VERSION: __version__, LABEL_MANAGED_BY: MANAGED_BY}
    if rank is not None:
        out[LABEL_NODE_RANK] = str(rank)
    return out


# --------------------------------------------------------------------------------------- the parts


def master_addr(spec: JobSpec) -> str:
    """Address every node uses to reach node 0 in local/compose runs.

    On a bridge network rank 0 listens only at its container name, so that is the address (``hosts`` then only
    names Slurm nodes); :func:`local_nodes` refuses a ``master_addr`` there instead of letting the job hang.
    """
    if spec.network != "host":
        return node_name(spec, 0)
    if spec.master_addr:
        return spec.master_addr
    if spec.hosts:
        return spec.hosts[0]
    return "127.0.0.1"


def user_command(spec: JobSpec) -> list[str]:
    """The command each training process runs (after ``torchrun --no-python``)."""
    cmd = list(spec.command)
    if cmd[0] == "ddp-train" and spec.backend != "auto" and "--backend" not in cmd:
        cmd += ["--backend", spec.backend]
    return cmd


# The job's checkpoint directory inside every container of a job that restarts (a volume the user mounts there).
CHECKPOINT_DIR = "/checkpoints"


def checkpoint_volume(job: str) -> str:
    """The named volume holding a job's checkpoints when the spec mounts none at :data:`CHECKPOINT_DIR` (``up``,
    compose); also the folder name of a Slurm job's default checkpoint directory in its submit directory."""
    return f"{job}-ckpt"


def restarts(spec: JobSpec) -> bool:
    """Is the job meant to survive a lost node (elastic, or restarts allowed)? Then it resumes on every start."""
    return spec.elastic or spec.max_restarts > 0


def resume_command(spec: JobSpec, output_dir: str = CHECKPOINT_DIR) -> list[str]:
    """:func:`user_command` for a job that starts again after a failure or a requeue: ``ddp-train`` writes its
    checkpoints to ``output_dir`` (unless its command names one) and resumes from the newest valid one
    (``--resume auto``, which starts fresh when there is none). Any other command is left as it is."""
    cmd = user_command(spec)
    if cmd[0].rsplit("/", 1)[-1] != "ddp-train":
        return cmd

    def given(flag: str) -> bool:
        return any(w == flag or w.startswith(flag + "=") for w in cmd[1:])

    if not given("--output-dir"):
        cmd += ["--output-dir", output_dir]
    if not given("--resume"):
        cmd += ["--resume", "auto"]
    return cmd


# ``tensorboard``: the directory under the job's checkpoint directory that ddp-train writes its TensorBoard event
# files to; every node also gets it as DDPCTL_TENSORBOARD, for any other program.
TENSORBOARD_ENV = "DDPCTL_TENSORBOARD"
TENSORBOARD_DIR = f"{CHECKPOINT_DIR}/tensorboard"


def mounts_checkpoint_dir(spec: JobSpec) -> bool:
    """Does the spec mount a volume of its own at :data:`CHECKPOINT_DIR`?"""
    return any(v.target == CHECKPOINT_DIR for v in spec.volumes)


def tensorboard_command(cmd: list[str], directory: str) -> list[str]:
    """A ``tensorboard`` job's command: ``ddp-train`` gets ``--tensorboard DIR`` unless its command names a
    directory of its own; any other program is left as it is (it finds ``DIR`` in :data:`TENSORBOARD_ENV`)."""
    if cmd[0].rsplit("/", 1)[-1] != "ddp-train" or any(w == "--tensorboard" or w.startswith("--tensorboard=")
                                                       for w in cmd[1:]):
        return cmd
    return [*cmd, "--tensorboard", directory]


def with_command(argv: list[str], spec: JobSpec, command: list[str]) -> list[str]:
    """``argv`` (from :func:`torchrun_argv`) with the user command after ``--no-python`` replaced."""
    return argv[:len(argv) - len(user_command(spec))] + command
