"""Per target: the local/compose nodes, the operator (PyTorchJob/TrainJob) command and env, the Slurm commands."""

from __future__ import annotations

from ddpctl.errors import SpecError
from ddpctl.launch.argv import base_env, gpu_requests, torchrun_argv
from ddpctl.launch.names import (
    CHECKPOINT_DIR,
    EXIT_CODE_LAUNCHER,
    TENSORBOARD_DIR,
    TENSORBOARD_ENV,
    NodeLaunch,
    ShellExpr,
    labels,
    master_addr,
    node_name,
    restarts,
    resume_command,
    tensorboard_command,
    user_command,
    with_command,
)
from ddpctl.launch.threads import nodes_per_host, thread_env
from ddpctl.spec import JobSpec

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
    if spec.tensorboard:  # the directory is on the job's checkpoint volume (local.plan, render.compose)
        env.setdefault(TENSORBOARD_ENV, TENSORBOARD_DIR)
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
        if spec.tensorboard:
            argv = with_command(argv, spec, tensorboard_command(user_command(spec), TENSORBOARD_DIR))
        out.append(NodeLaunch(rank=rank, name=node_name(spec, rank), argv=tuple(argv),
                              env=tuple(env.items()), gpus=gpus[rank],
                              labels=tuple(labels(spec, rank).items())))
    return out


def operator_env(spec: JobSpec) -> dict[str, str]:
    """PyTorchJob and TrainJob container env: one pod per node, threads from the CPU limit or at run time."""
    env = base_env(spec, thread_env(spec))
    if spec.tensorboard:  # on the volume the spec mounts at /checkpoints (render.kubernetes_pod refuses it without one)
        env.setdefault(TENSORBOARD_ENV, TENSORBOARD_DIR)
    return env


def operator_command(spec: JobSpec) -> list[str]:
    """PyTorchJob and TrainJob containers: torchrun reads the operator's ``PET_*`` env, so no flags.

    Through ``ddp-train-launch`` (in the ddp-train package of the image): torchrun with the root-cause worker's
    exit code (``restartPolicy: ExitCode`` needs it: >= 128 retry, < 128 fail; torchrun exits 1 for any worker
    failure), whole rank-prefixed lines, and a Python program's end made safe and bounded
    (ddp_train.launcher.worker, .exits), as on every other target.
    """
    argv = torchrun_argv(spec)
    argv[0] = EXIT_CODE_LAUNCHER
    cmd = resume_command(spec) if restarts(spec) else user_command(spec)  # a recreated pod resumes
    if spec.tensorboard:
        cmd = tensorboard_command(cmd, TENSORBOARD_DIR)
    return with_command(argv, spec, cmd)


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
    cmd = user_command(spec)
    if slurm_resumes(spec) or spec.slurm.container != "none":
        # ddp-train-launch (in the image; with no container, in the environment the script runs in when the job
        # resumes, as ddp-train is): a SIGTERM ends in one line and exit 143 (ddp-train's checkpoint), not a
        # traceback; a Python program's end made safe and bounded (ddp_train.launcher.worker, .exits)
        argv[0] = EXIT_CODE_LAUNCHER
    if slurm_resumes(spec):
        cmd = resume_command(spec, slurm_checkpoint_dir(spec))
    if spec.tensorboard:
        cmd = tensorboard_command(cmd, slurm_tensorboard_dir(spec))
    return with_command(argv, spec, cmd)


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


def slurm_tensorboard_dir(spec: JobSpec) -> str:
    """Where a Slurm job's ddp-train writes its TensorBoard event files: ``$DDPCTL_TENSORBOARD``, which the script
    exports as ``$DDPCTL_CHECKPOINTS/tensorboard`` (:data:`TENSORBOARD_DIR` inside a container)."""
    if spec.slurm.container != "none":
        return TENSORBOARD_DIR
    return ShellExpr(f'"${TENSORBOARD_ENV}"')


# The rendezvous store of a Slurm job: a TCPStore server (torch is where torchrun is) that waits for SIGTERM.
SLURM_STORE_CODE = ('import signal, sys, torch.distributed as d; '
                    's = d.TCPStore("0.0.0.0", int(sys.argv[1]), is_master=True, wait_for_workers=False, '
                    'multi_tenant=True); signal.pause()')


def slurm_store_command(spec: JobSpec) -> list[str]:
    """The process that hosts a Slurm job's c10d rendezvous store on the first node (see slurm_command)."""
    return ["python3", "-c", SLURM_STORE_CODE, str(spec.port)]
