"""The job spec's model: frozen dataclasses and their defaults. No validation and no I/O here.

Construct a :class:`JobSpec` through :func:`ddpctl.spec.spec_from_dict` / :func:`ddpctl.spec.load_spec`, which
check every value against the field table (:mod:`ddpctl.spec.fields`). Derived values are properties, never
stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ddpctl.secrets import SecretEnv

DEFAULT_NAME = "ddp"
DEFAULT_CPU_IMAGE = "ddpctl/ddp-train:cpu"
DEFAULT_GPU_IMAGE = "ddpctl/ddp-train:cuda"
DEFAULT_PORT = 29500
DEFAULT_COMMAND: tuple[str, ...] = ("ddp-train",)
MAX_NAME_LEN = 40  # leaves room for "-worker-<i>" / "-node-0-0" inside a 63-char DNS label
MAX_GPUS_PER_NODE = 16
MAX_NODES = 1024

INTERNAL_FIELDS = frozenset({"workdir_host"})  # filled in by load_spec, never a key of the file


@dataclass(frozen=True)
class Volume:
    """A bind mount: host ``source`` -> container ``target``."""

    source: str  # as written (a relative path starts with ./ or ~)
    target: str
    read_only: bool = False
    # The absolute host path, when :func:`load_spec` resolved a relative ``source`` (file values against the
    # file's directory, flag values against the current directory). Targets that run on this host use it.
    host: str | None = field(default=None, compare=False)

    @property
    def host_source(self) -> str:
        return self.host or self.source

    def __str__(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")

    def host_str(self) -> str:
        """``SOURCE:TARGET[:ro]`` with the resolved host source (compose, Slurm mounts)."""
        return f"{self.host_source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class NcclOptions:
    """Communication options that reach every process as env (NCCL_*, GLOO_*)."""

    socket_ifname: str | None = None  # NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME
    debug: str | None = None  # NCCL_DEBUG: WARN | INFO | TRACE
    ib_disable: bool = False  # NCCL_IB_DISABLE=1


@dataclass(frozen=True)
class KubernetesOptions:
    """Options that only the Kubernetes renderers (PyTorchJob, TrainJob) use."""

    namespace: str | None = None
    restart_policy: str | None = None  # OnFailure | ExitCode | Never; None: JobSpec.restart_policy decides
    backoff_limit: int = 3
    clean_pod_policy: str = "Running"  # Running | All | None
    ttl_seconds_after_finished: int = 3600
    active_deadline_seconds: int | None = None
    gang: bool = False  # runPolicy.schedulingPolicy.minAvailable = nodes
    scheduler_name: str | None = None
    queue: str | None = None  # schedulingPolicy.queue (Volcano)
    priority_class: str | None = None
    kueue_queue: str | None = None  # label kueue.x-k8s.io/queue-name
    istio_sidecar: bool = False  # False -> annotation sidecar.istio.io/inject: "false"
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    service_account: str | None = None
    runtime: str = "torch-distributed"  # TrainJob runtimeRef.name
    shm_size: int = 16 * 1024**3  # /dev/shm emptyDir sizeLimit when spec.shm_size is unset


@dataclass(frozen=True)
class SlurmOptions:
    """Options that only the Slurm renderer uses."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # [D-]HH:MM:SS
    cpus_per_task: int | None = None
    mem: str | None = None  # e.g. 64G, or 0 for all
    container: str = "none"  # none | pyxis | apptainer
    container_image: str | None = None  # default: the job image (docker:// for apptainer)
    output: str = "%x-%j.out"
    requeue: bool = False  # #SBATCH --requeue, and the job requeues itself after a USR1 checkpoint
    signal_seconds: int | None = None  # #SBATCH --signal=B:USR1@<seconds>: checkpoint before the time limit


@dataclass(frozen=True)
class WorkspaceOptions:
    """Your own code baked into an image (``ddpctl render ... --workdir DIR --push REPO``, ``ddpctl up --bake``):
    the directory, its pip requirements and the repository the image is pushed to."""

    dir: str | None = None  # default: the spec's workdir
    requirements: str | None = None  # default: DIR/requirements.txt when it exists
    repository: str | None = None  # REGISTRY/NAME; set: render builds, pushes and pins the image by digest


@dataclass(frozen=True)
class JobSpec:
    """A validated job. Construct through :func:`spec_from_dict` / :func:`load_spec`."""

    name: str = DEFAULT_NAME
    image: str = ""  # "" -> DEFAULT_CPU_IMAGE or DEFAULT_GPU_IMAGE by gpus_per_node
    nodes: int = 1  # the nodes the job starts with; with min_nodes, the most an elastic job runs on
    min_nodes: int | None = None  # `nodes: MIN:MAX`: an elastic job goes on with as few as MIN nodes
    gpus_per_node: int = 0
    nproc_per_node: int = 0  # 0 -> gpus_per_node, or 1 on CPU
    device_ids: tuple[str, ...] = ()  # host GPU ids split across nodes sharing one host
    backend: str = "auto"  # auto | nccl | gloo
    port: int = DEFAULT_PORT
    command: tuple[str, ...] = DEFAULT_COMMAND
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()  # values never in a file: Kubernetes Secret / caller's environment
    volumes: tuple[Volume, ...] = ()
    workdir: str | None = None  # host dir mounted at /workspace and used as the working directory
    user: str | None = None  # uid[:gid] or name[:group] the containers run as (`up`: the caller's by default)
    ipc: str = "host"  # host | private
    shm_size: int | None = None  # bytes; only with ipc=private
    network: str = "bridge"  # bridge (one host, private network) | host (multi-host)
    hosts: tuple[str, ...] = ()  # one address per node for multi-host runs
    docker_hosts: tuple[str, ...] = ()  # `ddpctl up`: one Docker host (URL or context name) per node
    master_addr: str | None = None  # override the master address
    max_restarts: int = 0
    memlock: bool = False  # ulimit memlock=-1 (opt-in: needs a daemon allowed to raise it)
    tensorboard: bool = False  # ddp-train --tensorboard <the job's checkpoint directory>/tensorboard
    cpus_per_node: float | None = None
    memory_per_node: int | None = None  # bytes
    nccl: NcclOptions = field(default_factory=NcclOptions)
    kubernetes: KubernetesOptions = field(default_factory=KubernetesOptions)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    workspace: WorkspaceOptions = field(default_factory=WorkspaceOptions)
    workdir_host: str | None = field(default=None, compare=False)  # ``workdir`` resolved by load_spec

    # Derived values are properties, never stored twice.
    @property
    def resolved_workdir(self) -> str | None:
        """The host directory to mount at /workspace: absolute when :func:`load_spec` resolved it."""
        return self.workdir_host or self.workdir

    @property
    def baked(self) -> bool:
        """Is the code in the image (a workspace image pinned by digest) rather than mounted?"""
        return bool(self.workspace.repository) and "@sha256:" in self.image

    @property
    def resolved_image(self) -> str:
        if self.image:
            return self.image
        return DEFAULT_GPU_IMAGE if self.gpus_per_node else DEFAULT_CPU_IMAGE

    @property
    def procs_per_node(self) -> int:
        if self.nproc_per_node:
            return self.nproc_per_node
        return self.gpus_per_node or 1

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def resolved_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        return "nccl" if self.gpus_per_node else "gloo"

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def multi_host(self) -> bool:
        return len(self.hosts) > 1

    @property
    def elastic(self) -> bool:
        """``nodes: MIN:MAX`` with MIN < MAX: torchrun's c10d rendezvous with ``--nnodes MIN:MAX``."""
        return self.min_nodes is not None and self.min_nodes < self.nodes

    @property
    def nodes_range(self) -> str:
        """``MIN:MAX`` for an elastic job, else the node count (torchrun's ``--nnodes``)."""
        return f"{self.min_nodes}:{self.nodes}" if self.elastic else str(self.nodes)

    @property
    def restart_policy(self) -> str:
        """PyTorchJob's replica restartPolicy: as given, else ExitCode when the job is meant to survive a lost
        node (elastic, or max_restarts), else OnFailure (the operator's default)."""
        given = self.kubernetes.restart_policy
        if given:
            return given
        return "ExitCode" if (self.elastic or self.max_restarts) else "OnFailure"

    @property
    def nodes_per_host(self) -> int:
        """How many of the job's nodes share one host: all of them unless ``hosts`` (or ``docker_hosts``) gives
        each node its own.

        The one statement of that rule: GPU requests (:func:`ddpctl.launch.gpu_requests`), the per-host thread
        share and the ``device_ids`` check all read it.
        """
        return 1 if self.hosts or self.docker_hosts else self.nodes


# The sections: top-level keys whose value is a mapping of options of their own (checked by the same table).
SECTIONS: dict[str, type] = {"nccl": NcclOptions, "kubernetes": KubernetesOptions, "slurm": SlurmOptions,
                             "workspace": WorkspaceOptions}
