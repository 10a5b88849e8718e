"""The launch contract: how each node of a job starts ``torchrun`` and what env it gets.

Pure functions of a :class:`~ddpctl.spec.JobSpec`. Every target (local Docker, compose, PyTorchJob, TrainJob,
Slurm) gets its command from here, so there is one copy of the rules:

- the training processes are always started by ``torchrun``, which sets ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` for each child;
- Docker and compose pass the topology as flags with a static rendezvous (node *i* is node rank *i*, node 0
  is the master, ``<job>-node-0`` on a private network or the first host with host networking), through
  ``ddp-train-launch`` (torchrun whose output lines carry ``rank-<global rank> | `` and whose failure is one
  root-cause line, see ``ddp_train.launcher.run``), so the image must contain the ddp-train package;
- PyTorchJob and TrainJob pass no topology flags at all, through ``ddp-train-launch`` too: the operator injects
  ``PET_*`` variables that torchrun reads (``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``,
  ``PET_MASTER_PORT``), see docs/render.md;
- Slurm uses a c10d rendezvous on the first host of ``$SLURM_JOB_NODELIST``, whose store is a process of
  its own (:func:`slurm_store_command`) that outlives every node's torchrun; ``ddp-train-launch`` in a
  container or when the job resumes, plain ``torchrun`` otherwise (the host's environment may lack ddp-train).

CPU threads (:func:`thread_env`): every training process gets ``OMP_NUM_THREADS`` = max(1, CPUs available to
its node's container / processes on that node), where nodes that share one host share its CPUs. ``ddpctl up``
knows the host, so the number is fixed at plan time; compose knows it only with ``cpus_per_node``; PyTorchJob
and TrainJob know it from the CPU limit (``cpus_per_node``), and otherwise ``ddp-train`` decides at run time
from the container's cgroup CPU quota and affinity (``DDP_TRAIN_THREADS=auto``); Slurm computes it in the
script from ``SLURM_CPUS_ON_NODE``. A user's own ``OMP_NUM_THREADS`` (spec ``env`` / ``-e``) always wins.

NCCL over TCP (:data:`NCCL_SOCKETS_ENV`): GPU jobs of several nodes get ``DDP_TRAIN_NCCL_SOCKETS=auto``; in the
node, at run time, ``ddp-train-launch`` / ``ddp-train`` set ``NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4``
unless ``/sys/class/infiniband`` shows a device NCCL may use or the env sets them (``ddp_train.comm.socket_transport``). The
spec's ``env`` overrides either (``DDP_TRAIN_NCCL_SOCKETS: "off"``, or its own NCCL values).

TensorBoard (spec ``tensorboard``): ``ddp-train`` gets ``--tensorboard`` on the job's checkpoint directory
(:data:`TENSORBOARD_DIR`, ``$DDPCTL_TENSORBOARD`` in a Slurm script) unless its command names one; every node gets
the directory as ``DDPCTL_TENSORBOARD``. The volume there is each target's business (local.plan, render.*).

The user's command is run with ``torchrun --no-python``, so ``ddp-train ...`` and ``python train.py ...``
both work unchanged.
"""

from __future__ import annotations

from ddpctl.launch.argv import (  # noqa: F401
    NCCL_SOCKETS_ENV,
    base_env,
    gpu_requests,
    torchrun_argv,
)
from ddpctl.launch.commands import (  # noqa: F401
    SLURM_CHECKPOINT_ENV,
    SLURM_STORE_CODE,
    local_nodes,
    operator_command,
    operator_env,
    slurm_checkpoint_dir,
    slurm_command,
    slurm_resumes,
    slurm_store_command,
    slurm_tensorboard_dir,
)
from ddpctl.launch.names import (  # noqa: F401
    CHECKPOINT_DIR,
    CONTAINER_WORKDIR,
    EXIT_CODE_LAUNCHER,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_NODE_RANK,
    LABEL_VERSION,
    MANAGED_BY,
    PET_VARS,
    STACK_ULIMIT,
    TENSORBOARD_DIR,
    TENSORBOARD_ENV,
    TRAINJOB_MASTER_PORT,
    GpuRequest,
    NodeLaunch,
    ShellExpr,
    checkpoint_volume,
    job_label,
    labels,
    master_addr,
    mounts_checkpoint_dir,
    network_name,
    node_name,
    pytorchjob_pod_name,
    restarts,
    resume_command,
    tensorboard_command,
    trainjob_master_addr,
    user_command,
    with_command,
)
from ddpctl.launch.threads import (  # noqa: F401
    AUTO_THREADS_ENV,
    NODES_PER_HOST_ENV,
    THREADS_ENV,
    node_cpus,
    nodes_per_host,
    omp_threads,
    slurm_thread_lines,
    thread_env,
)
