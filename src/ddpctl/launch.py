"""The launch contract: how each node of a job starts ``torchrun`` and what env it gets.

Pure functions of a :class:`~ddpctl.spec.JobSpec`. Every target (local Docker, compose, PyTorchJob, TrainJob,
Slurm) gets its command from here, so there is one copy of the rules:

- the training processes are always started by ``torchrun``, which sets ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` for each child;
- Docker and compose pass the topology as flags with a static rendezvous (node *i* is node rank *i*, node 0
  is the master, ``<job>-node-0`` on a private network or the first host with host networking), through
  ``ddp-train-launch`` (torchrun whose output lines carry ``rank-<global rank> | `` and whose failure is one
  root-cause line, see ``ddp_train.launcher``), so the image must contain the ddp-train package;
- PyTorchJob and TrainJob pass no topology flags at all: the operator injects ``PET_*`` variables that
  torchrun reads (``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``,
  ``PET_MASTER_PORT``), see docs/render.md;
- Slurm uses a c10d rendezvous on the first host of ``$SLURM_JOB_NODELIST``, whose store is a process of
  its own (:func:`slurm_store_command`) that outlives every node's torchrun.

CPU threads (:func:`thread_env`): every training process gets ``OMP_NUM_THREADS`` = max(1, CPUs available to
its node's container / processes on that node), where nodes that share one host share its CPUs. ``ddpctl up``
knows the host, so the number is fixed at plan time; compose knows it only with ``cpus_per_node``; PyTorchJob
and TrainJob know it from the CPU limit (``cpus_per_node``), and otherwise ``ddp-train`` decides at run time
from the container's cgroup CPU quota and affinity (``DDP_TRAIN_THREADS=auto``); Slurm computes it in the
script from ``SLURM_CPUS_ON_NODE``. A user's own ``OMP_NUM_THREADS`` (spec ``env`` / ``-e``) always wins.

The user's command is run with ``torchrun --no-python``, so ``ddp-train ...`` and ``python train.py ...``
both work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl import __version__
from ddpctl.errors import SpecError
from ddpctl.spec import JobSpec

# Labels on everything ddpctl creates; `ps`, `logs` and `down` find resources by them.
LABEL_JOB = "ddpctl.job"
LABEL_NODE_RANK = "ddpctl.node-rank"
LABEL_VERSION = "ddpctl.version"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "ddpctl"

CONTAINER_WORKDIR = "/workspace"  # where `workdir` is mounted in containers
TRAINJOB_MASTER_PORT = 29500  # fixed by the Trainer v2 torch plugin
EXIT_CODE_LAUNCHER = "ddp-train-launch"  # torchrun + rank-prefixed output + the workers' exit code (ddp_train.launcher)
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


def _with_command(argv: list[str], spec: JobSpec, command: list[str]) -> list[str]:
    """``argv`` (from :func:`torchrun_argv`) with the user command after ``--no-python`` replaced."""
    return argv[:len(argv) - len(user_command(spec))] + command


# ------------------------------------------------------------------------------------------ threads

THREADS_ENV = "OMP_NUM_THREADS"
AUTO_THREADS_ENV = "DDP_TRAIN_THREADS"  # "auto": ddp-train sets the threads at run time (ddp_train.threads)
NODES_PER_HOST_ENV = "DDP_TRAIN_NODES_PER_HOST"  # how many nodes share the container's host CPUs (auto mode)


def omp_threads(cpus: float, procs: int) -> int:
    """The rule: max(1, CPUs available to a node / processes on that node), rounded down."""
    return max(1, int(cpus + 1e-9) // max(1, procs))


def nodes_per_host(spec: JobSpec) -> int:
    """How many of the job's nodes share one host's CPUs (local Docker and single-host compose: all)."""
    return spec.nodes_per_host


def node_cpus(spec: JobSpec, host_cpus: float | None, sharing: int = 1) -> float | None:
    """CPUs one node can use: its ``cpus_per_node`` limit, capped by its share of the host's CPUs."""
    shares = [c for c in (spec.cpus_per_node, host_cpus / max(1, sharing) if host_cpus else None) if c]
    return min(shares) if shares else None


def thread_env(spec: JobSpec, *, host_cpus: float | None = None, sharing: int = 1) -> dict[str, str]:
    """``OMP_NUM_THREADS`` when the CPUs are known here; otherwise ask ddp-train to decide at run time.

    Nothing when the user set ``OMP_NUM_THREADS`` (spec env / ``-e``): theirs reaches the processes.
    """
    if THREADS_ENV in spec.env_dict:
        return {}
    cpus = node_cpus(spec, host_cpus, sharing)
    if cpus is not None:
        return {THREADS_ENV: str(omp_threads(cpus, spec.procs_per_node))}
    if spec.command[0] != "ddp-train":
        return {}  # a user's own program: torchrun's default applies (1 thread with several processes)
    env = {AUTO_THREADS_ENV: "auto"}
    if sharing > 1:
        env[NODES_PER_HOST_ENV] = str(sharing)
    return env


def slurm_thread_lines(spec: JobSpec) -> list[str]:
    """sbatch lines that export OMP_NUM_THREADS = SLURM_CPUS_ON_NODE / processes per node (the same rule).

    Run-time values are checked to be plain digits before the shell does arithmetic with them, and an
    OMP_NUM_THREADS already exported (submission environment) is kept.
    """
    if THREADS_ENV in spec.env_dict:
        return []
    procs = spec.procs_per_node
    return [
        "# CPU threads per training process: the node's CPUs / its processes (an exported value wins).",
        'if [ -z "${OMP_NUM_THREADS:-}" ]; then',
        '    case "${SLURM_CPUS_ON_NODE:-}" in',
        "        ''|*[!0-9]*) ddpctl_cpus=$(nproc) ;;",
        '        *) ddpctl_cpus=$SLURM_CPUS_ON_NODE ;;',
        "    esac",
        f"    OMP_NUM_THREADS=$(( ddpctl_cpus / {procs} ))",
        '    if [ "$OMP_NUM_THREADS" -lt 1 ]; then OMP_NUM_THREADS=1; fi',
        "    export OMP_NUM_THREADS",
        "fi",
    ]


def base_env(spec: JobSpec, threads: dict[str, str] | None = None) -> dict[str, str]:
    """Env every node gets from ddpctl on every target (``threads`` from :func:`thread_env`; user env last,
    so it wins)."""
    env = {"PYTHONUNBUFFERED": "1"}
    env.update(threads or {})
    if spec.nccl.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = spec.nccl.socket_ifname
        env["GLOO_SOCKET_IFNAME"] = spec.nccl.socket_ifname
    if spec.nccl.debug:
        env["NCCL_DEBUG"] = spec.nccl.debug
    if spec.nccl.ib_disable:
        env["NCCL_IB_DISABLE"] = "1"
    env.update(spec.env_dict)
    return env


def gpu_requests(spec: JobSpec) -> list[GpuRequest]:
    """The GPUs each node gets. Several nodes on one host get disjoint ``device_ids``."""
    g = spec.gpus_per_node
    if not g:
        return [GpuRequest() for _ in range(spec.nodes)]
    if spec.nodes_per_host == 1:  # one node per host: every node takes the same GPUs of its host
        req = GpuRequest(device_ids=spec.device_ids[:g]) if spec.device_ids else GpuRequest(count=g)
        return [req for _ in range(spec.nodes)]
    ids = spec.device_ids or tuple(str(i) for i in range(spec.nodes * g))
    return [GpuRequest(device_ids=tuple(ids[i * g:(i + 1) * g])) for i in range(spec.nodes)]


def torchrun_argv(
    spec: JobSpec,
    *,
    nnodes: str | None = None,
    node_rank: str | None = None,
    master: str | None = None,
    master_port: str | None = None,
    rdzv_backend: str | None = None,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
    nproc_per_node: str | None = None,
    rdzv_conf: str | None = None,
    restarts: bool = True,
) -> list[str]:
    """``torchrun [topology flags] --no-python <user command>``; flags left None are omitted.

    ``restarts=False``: no ``--max-restarts`` (``ddpctl up`` restarts the whole job itself)."""
    argv = ["torchrun"]
    for flag, value in (
        ("--nnodes", nnodes),
        ("--nproc-per-node", nproc_per_node),
        ("--node-rank", node_rank),
        ("--master-addr", master),
        ("--master-port", master_port),
        ("--rdzv-backend", rdzv_backend),
        ("--rdzv-endpoint", rdzv_endpoint),
        ("--rdzv-id", rdzv_id),
        ("--rdzv-conf", rdzv_conf),
    ):
        if value is not None:
            argv += [flag, value]
    if spec.max_restarts and restarts:
        argv += ["--max-restarts", str(spec.max_restarts)]
    argv.append("--no-python")
    return argv + user_command(spec)


# ------------------------------------------------------------------------------------------ targets


def local_nodes(spec: JobSpec, *, host_cpus: float | None = None, torchrun_restarts: bool = True) -> list[NodeLaunch]:
    """Docker (``ddpctl up``) and compose: one container per node, static rendezvous at node 0.

    ``host_cpus``: the CPUs of the host the nodes run on (``ddpctl up`` knows them; a rendered compose file
    does not, so its threads come from ``cpus_per_node`` or are decided in the container).
    ``torchrun_restarts=False``: ``max_restarts`` is not passed to torchrun (``ddpctl up`` restarts the job,
    see :mod:`ddpctl.local.restarts`)."""
    if spec.network == "host" and spec.nodes > 1 and not spec.hosts:
        # Checked here, not in the spec: Kubernetes hostNetwork needs no host list.
        raise SpecError("'hosts' is required with network: host and more than one node",
                        "list one host address per node, the master first")
    if spec.network != "host" and spec.master_addr and spec.master_addr != node_name(spec, 0):
        raise SpecError(f"'master_addr' {spec.master_addr!r} is not reachable on a bridge network (rank 0 listens "
                        f"at {node_name(spec, 0)} only)", "drop master_addr, or use network: host with hosts")
    addr = master_addr(spec)
    gpus = gpu_requests(spec)
    env = base_env(spec, thread_env(spec, host_cpus=host_cpus, sharing=nodes_per_host(spec)))
    out = []
    for rank in range(spec.nodes):
        argv = torchrun_argv(
            spec,
            nnodes=str(spec.nodes),
            nproc_per_node=str(spec.procs_per_node),
            node_rank=str(rank),
            master=addr,
            master_port=str(spec.port),
            restarts=torchrun_restarts,
        )
        argv[0] = EXIT_CODE_LAUNCHER  # torchrun with rank-prefixed whole lines and a root-cause line
        out.append(NodeLaunch(rank=rank, name=node_name(spec, rank), argv=tuple(argv),
                              env=tuple(env.items()), gpus=gpus[rank],
                              labels=tuple(labels(spec, rank).items())))
    return out


def operator_env(spec: JobSpec) -> dict[str, str]:
    """PyTorchJob and TrainJob container env: one pod per node, threads from the CPU limit or at run time."""
    return base_env(spec, thread_env(spec))


def operator_command(spec: JobSpec) -> list[str]:
    """PyTorchJob and TrainJob containers: torchrun reads the operator's ``PET_*`` env, so no flags.

    With ``restartPolicy: ExitCode`` the operator needs the workers' exit codes (>= 128 retry, < 128 fail),
    but torchrun exits 1 for any worker failure; ``ddp-train-launch`` (in the ddp-train package of the
    image) is torchrun with the root-cause worker's exit code, so it starts the job instead.
    """
    argv = torchrun_argv(spec)
    if spec.restart_policy == "ExitCode":
        argv[0] = EXIT_CODE_LAUNCHER
    if restarts(spec):  # a recreated pod, or torchrun's own restart, resumes from the last checkpoint
        argv = _with_command(argv, spec, resume_command(spec))
    return argv


def slurm_command(spec: JobSpec) -> list[str]:
    """What ``srun`` runs on every node; ``ShellExpr`` words expand Slurm variables at run time.

    A c10d rendezvous at ``$MASTER_ADDR:port`` in which every torchrun is a client (``is_host=false``): the
    store is :func:`slurm_store_command`, started on the first node before the training step and stopped
    after it. When a torchrun hosts the store instead (c10d's default, or a static rendezvous on node 0),
    it exits as soon as its own node is done, and the other nodes' torchrun, still closing the rendezvous
    or in their exit barrier, print connection errors and tracebacks (docs/several-hosts.md).
    """
    argv = torchrun_argv(
        spec,
        nnodes=ShellExpr('"$SLURM_JOB_NUM_NODES"'),
        nproc_per_node=str(spec.procs_per_node),
        rdzv_backend="c10d",
        rdzv_endpoint=ShellExpr(f'"$MASTER_ADDR:{spec.port}"'),
        rdzv_id=ShellExpr('"$SLURM_JOB_ID"'),
        rdzv_conf="is_host=false",
    )
    if slurm_resumes(spec):
        # ddp-train-launch: a SIGTERM ends in one line and exit 143 (ddp-train's checkpoint), not a traceback
        argv[0] = EXIT_CODE_LAUNCHER
        argv = _with_command(argv, spec, resume_command(spec, slurm_checkpoint_dir(spec)))
    return argv


SLURM_CHECKPOINT_ENV = "DDPCTL_CHECKPOINTS"


def slurm_resumes(spec: JobSpec) -> bool:
    """Does a Slurm job start again (requeue, the USR1 checkpoint, torchrun restarts) and so resume?"""
    return restarts(spec) or spec.slurm.requeue or bool(spec.slurm.signal_seconds)


def slurm_checkpoint_dir(spec: JobSpec) -> str:
    """Where a Slurm job's ddp-train keeps its checkpoints: a shared directory every node and every requeued
    run sees: ``$DDPCTL_CHECKPOINTS`` (the script defaults it to ``$SLURM_SUBMIT_DIR/<job>-ckpt``), or
    :data:`CHECKPOINT_DIR` inside a container (a volume the spec mounts there)."""
    if spec.slurm.container != "none":
        return CHECKPOINT_DIR
    return ShellExpr(f'"${SLURM_CHECKPOINT_ENV}"')


# The rendezvous store of a Slurm job: a TCPStore server (torch is where torchrun is) that waits for SIGTERM.
SLURM_STORE_CODE = ('import signal, sys, torch.distributed as d; '
                    's = d.TCPStore("0.0.0.0", int(sys.argv[1]), is_master=True, wait_for_workers=False, '
                    'multi_tenant=True); signal.pause()')


def slurm_store_command(spec: JobSpec) -> list[str]:
    """The process that hosts a Slurm job's c10d rendezvous store on the first node (see slurm_command)."""
    return ["python3", "-c", SLURM_STORE_CODE, str(spec.port)]
