"""Slurm renderer: an sbatch script that runs ``torchrun`` on every node through ``srun``.

One task per node (``--ntasks-per-node=1``), each task a torchrun agent with ``nproc_per_node`` workers and a
c10d rendezvous at the first host of ``$SLURM_JOB_NODELIST`` (:func:`ddpctl.launch.slurm_command`), whose store
runs in a step of its own on that host for the whole job (:func:`ddpctl.launch.slurm_store_command`). Optionally
inside a container: pyxis (``srun --container-image``) or Apptainer/Singularity (``apptainer exec``).

Quoting: every value that reaches the shell goes through :func:`shlex.quote`, except the
:class:`~ddpctl.launch.ShellExpr` words of the launch contract, which expand Slurm variables on purpose.
``#SBATCH`` lines are read by sbatch, not by the shell; their values are restricted to a safe character set.
"""

from __future__ import annotations

import math
import re
import shlex

from ddpctl import launch
from ddpctl.errors import UnsupportedFeature
from ddpctl.render import workspace_section
from ddpctl.spec import JobSpec
from ddpctl.targets import Support, Unsupported

TARGET = "slurm"

SUPPORT = Support(TARGET, sections=("nccl", "slurm", workspace_section.SECTION), honours=workspace_section.HONOURS | frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "backend", "port", "command", "env", "secret_env",
    "volumes", "workdir", "network", "hosts", "master_addr", "max_restarts", "cpus_per_node", "memory_per_node",
    "tensorboard",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
    "slurm.partition", "slurm.account", "slurm.qos", "slurm.time", "slurm.cpus_per_task", "slurm.mem",
    "slurm.container", "slurm.container_image", "slurm.output", "min_nodes", "slurm.requeue", "slurm.signal_seconds",
}), unsupported=workspace_section.UNSUPPORTED + (
    Unsupported("device_ids", lambda s: bool(s.device_ids), "Slurm assigns the GPUs of each allocation",
                "drop device_ids; gpus_per_node becomes --gres=gpu:G"),
    Unsupported("docker_hosts", lambda s: bool(s.docker_hosts), "Slurm starts the job on the nodes it allocates",
                "drop docker_hosts (hosts become --nodelist)"),
    Unsupported("shm_size", lambda s: s.shm_size is not None, "Slurm jobs use the node's own /dev/shm",
                "drop shm_size"),
    Unsupported("ipc", lambda s: s.ipc != "host", "Slurm jobs share the node's IPC namespace and /dev/shm",
                "drop ipc"),
    Unsupported("memlock", lambda s: s.memlock, "ulimits come from the cluster's configuration",
                "drop memlock and ask the admins for an unlimited memlock limit"),
    Unsupported("hosts given as IP addresses", lambda s: any(_IP_RE.match(h) for h in s.hosts),
                "hosts become --nodelist, which takes Slurm node names", "list the Slurm node names as hosts",
                fields=()),
    Unsupported("user", lambda s: s.user is not None, "Slurm jobs run as the user who submits them",
                "drop user and submit the job as that user"),
    Unsupported("a workspace image without a container", lambda s: s.baked and s.slurm.container == "none",
                "the code is in the image, which only a container runtime runs",
                "add --container pyxis or --container apptainer"),
    Unsupported("volumes without a container", lambda s: bool(s.volumes) and s.slurm.container == "none",
                "without a container the job sees the nodes' file systems directly",
                "drop volumes, or use --container pyxis|apptainer", fields=()),
    Unsupported("resuming in a container without a checkpoint volume",
                lambda s: launch.slurm_resumes(s) and s.slurm.container != "none"
                and not any(v.target == launch.CHECKPOINT_DIR for v in s.volumes),
                f"a requeued or restarted job resumes from {launch.CHECKPOINT_DIR}, which must be a shared directory",
                f"mount one there: -v /shared/ckpt:{launch.CHECKPOINT_DIR}", fields=()),
    Unsupported("tensorboard in a container without a volume at /checkpoints",
                lambda s: s.tensorboard and s.slurm.container != "none" and not launch.mounts_checkpoint_dir(s),
                f"ddp-train writes the event files to {launch.TENSORBOARD_DIR}, which would go with the container",
                f"mount a shared directory there: -v /shared/ckpt:{launch.CHECKPOINT_DIR}", fields=()),
))

_IP_RE = re.compile(r"^(\d{1,3}(\.\d{1,3}){3}|\[?[0-9A-Fa-f:]*:[0-9A-Fa-f:]*\]?)$")
_DIRECTIVE_RE = re.compile(r"^[A-Za-z0-9_.,+:\-]+$")
_OUTPUT_RE = re.compile(r"^[A-Za-z0-9_.,%/+\-]+$")
_PATH_RE = re.compile(r"^[A-Za-z0-9_.,/~+\-]+$")


def _q(word: str) -> str:
    return word if isinstance(word, launch.ShellExpr) else shlex.quote(word)


def _directive(flag: str, value: str, pattern: re.Pattern = _DIRECTIVE_RE) -> str:
    if not pattern.fullmatch(value):
        raise UnsupportedFeature(TARGET, f"{flag}={value!r}",
                                 "#SBATCH values cannot carry spaces, quotes or shell characters",
                                 "use a plain name of letters, digits, '.', '_' and '-'")
    return f"#SBATCH {flag}={value}"


def _mem_mib(nbytes: int) -> str:
    return f"{math.ceil(nbytes / 1024**2)}M"


def pyxis_image(ref: str) -> str:
    """A Docker reference in enroot's syntax, which pyxis passes on: ``REGISTRY#PATH[:TAG|@DIGEST]`` (enroot reads
    a first component before '/' as part of the path on Docker Hub, never as a registry host)."""
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref


def _container_words(spec: JobSpec) -> tuple[list[str], list[str]]:
    """(srun options, words before torchrun) for the chosen container runtime."""
    s = spec.slurm
    mounts = [v.host_str() for v in spec.volumes]
    if spec.workdir:
        mounts.append(f"{spec.resolved_workdir}:{launch.CONTAINER_WORKDIR}")
    if s.container == "pyxis":
        opts = [f"--container-image={s.container_image or pyxis_image(spec.resolved_image)}"]
        if mounts:
            opts.append(f"--container-mounts={','.join(mounts)}")
        if spec.workdir or spec.baked:
            opts.append(f"--container-workdir={launch.CONTAINER_WORKDIR}")
        return opts, []
    if s.container == "apptainer":
        words = ["apptainer", "exec"]
        if spec.gpus_per_node:
            words.append("--nv")
        for m in mounts:
            words += ["--bind", m]
        if spec.workdir or spec.baked:
            words += ["--pwd", launch.CONTAINER_WORKDIR]
        words.append(s.container_image or f"docker://{spec.resolved_image}")
        return [], words
    return [], []


def render(spec: JobSpec) -> str:
    """The sbatch script text."""
    SUPPORT.check(spec)
    s = spec.slurm
    head = ["#!/bin/bash",
            f"# ddpctl: job '{spec.name}', {spec.nodes_range} node(s) x {spec.procs_per_node} process(es), "
            f"backend {spec.resolved_backend}. Submit with: sbatch <this file>",
            _directive("--job-name", spec.name),
            # elastic: Slurm allocates between MIN and MAX nodes; torchrun's rendezvous takes what it got
            _directive("--nodes", f"{spec.min_nodes}-{spec.nodes}" if spec.elastic else str(spec.nodes)),
            "#SBATCH --ntasks-per-node=1"]
    if spec.gpus_per_node:
        head.append(_directive("--gres", f"gpu:{spec.gpus_per_node}"))
    cpus = s.cpus_per_task or (math.ceil(spec.cpus_per_node) if spec.cpus_per_node else None)
    if cpus:
        head.append(_directive("--cpus-per-task", str(cpus)))
    mem = s.mem or (_mem_mib(spec.memory_per_node) if spec.memory_per_node else None)
    if mem:
        head.append(_directive("--mem", mem))
    for flag, value in (("--partition", s.partition), ("--account", s.account), ("--qos", s.qos),
                        ("--time", s.time)):
        if value:
            head.append(_directive(flag, value))
    if spec.hosts:
        head.append(_directive("--nodelist", ",".join(spec.hosts)))
    if spec.workdir and s.container == "none":
        head.append(_directive("--chdir", spec.resolved_workdir, _PATH_RE))
    head.append(_directive("--output", s.output, _OUTPUT_RE))
    if s.requeue:
        head.append("#SBATCH --requeue")
        head.append("#SBATCH --open-mode=append")  # a requeued run adds to the log instead of replacing it
    if s.signal_seconds:
        head.append(f"#SBATCH --signal=B:USR1@{int(s.signal_seconds)}")  # an int: nothing to quote

    body = ["", "set -euo pipefail", ""]
    for key, value in launch.base_env(spec).items():
        body.append(f"export {key}={shlex.quote(value)}")
    if spec.secret_env:
        body.append("# Secrets: not in this script; sbatch passes them from the environment it is called from.")
    for secret in spec.secret_env:  # a name is an env name (rules.env_name): safe unquoted
        body.append(f': "${{{secret.name}:?is not set: export it before sbatch (its value is not in this script)}}"')
        body.append(f"export {secret.name}")
    body.append("")
    if launch.slurm_resumes(spec) or spec.tensorboard:
        body += _checkpoint_lines(spec)
    threads = launch.slurm_thread_lines(spec)
    if threads:
        body += threads + [""]
    body.append("# The first host of the allocation runs the c10d rendezvous store.")
    body.append('FIRST_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"')  # sed, not head: no SIGPIPE under pipefail
    if spec.master_addr:
        body.append(f"MASTER_ADDR={shlex.quote(spec.master_addr)}  # an address of $FIRST_NODE")
    else:
        body.append('MASTER_ADDR="$FIRST_NODE"')
    body.append("export MASTER_ADDR")
    body.append("")
    srun_opts, prefix = _container_words(spec)
    body.append("# The store runs in a step of its own for the whole job, so every node's torchrun (a client) can")
    body.append("# close the rendezvous and pass its exit barrier before it goes away: no errors at the end.")
    store = ["srun", "--overlap", "--nodes=1", "--ntasks=1", launch.ShellExpr('--nodelist="$FIRST_NODE"'), *srun_opts]
    body.append(" ".join(_q(w) for w in store) + " \\")
    body.append("    " + " ".join(_q(w) for w in [*prefix, *launch.slurm_store_command(spec)]) + " &")
    body.append("STORE_PID=$!")
    body.append("trap 'kill \"$STORE_PID\" 2>/dev/null || true' EXIT")
    body.append("")
    nodes = launch.ShellExpr('--nodes="$SLURM_JOB_NUM_NODES"') if spec.elastic else "--nodes=" + str(spec.nodes)
    srun = ["srun", nodes, "--ntasks-per-node=1", "--kill-on-bad-exit=1", *srun_opts]
    torchrun = launch.slurm_command(spec)
    body.append(" ".join(_q(w) for w in srun) + " \\")
    if prefix:
        body.append("    " + " ".join(_q(w) for w in prefix) + " \\")
    if not s.signal_seconds:
        body.append("    " + " ".join(_q(w) for w in torchrun))
        return "\n".join(head + body) + "\n"
    body.append("    " + " ".join(_q(w) for w in torchrun) + " &")
    body += _signal_lines(spec)
    return "\n".join(head + body) + "\n"


def _checkpoint_lines(spec: JobSpec) -> list[str]:
    """The job's checkpoint directory, shared by all nodes and runs: what a requeued (or restarted) run resumes
    from, and where ``tensorboard`` puts the event files (``tensorboard/`` in it)."""
    resumes = launch.slurm_resumes(spec)
    lines = ["# Checkpoints: every run of this job (a requeue too) resumes from the newest one here (--resume auto)."
             if resumes else "# The job's checkpoint directory (TensorBoard event files go to tensorboard/ in it)."]
    if spec.slurm.container == "none":
        default = f"${{SLURM_SUBMIT_DIR:-$PWD}}/{launch.checkpoint_volume(spec.name)}"  # the job name is a DNS label: safe in double quotes
        lines.append(f'export {launch.SLURM_CHECKPOINT_ENV}="${{{launch.SLURM_CHECKPOINT_ENV}:-{default}}}"'
                     "  # a directory every node sees")
        lines.append(f'mkdir -p "${launch.SLURM_CHECKPOINT_ENV}"')
    else:
        lines.append(f"export {launch.SLURM_CHECKPOINT_ENV}={launch.CHECKPOINT_DIR}  # the volume mounted there")
    if spec.tensorboard:  # ddp-train --tensorboard "$DDPCTL_TENSORBOARD"; any other program can read it
        lines.append(f'export {launch.TENSORBOARD_ENV}="${launch.SLURM_CHECKPOINT_ENV}/tensorboard"')
    if resumes:
        lines.append('export DDPCTL_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"  # 0 on the first run, then per requeue')
    lines.append("")
    return lines


def _signal_lines(spec: JobSpec) -> list[str]:
    """--signal=B:USR1@T reaches this script T seconds before the time limit: SIGTERM to every process of the
    job's steps (``scancel --signal``, which only signals; a SIGTERM to srun would cancel the step and SIGKILL
    its tasks at once), so every ddp-train stops at one agreed step and saves; then the job requeues itself
    (with requeue) and resumes from that checkpoint."""
    out = ["TRAIN_PID=$!",
           "STOPPED=0",
           f"on_usr1() {{ STOPPED=1; echo \"ddpctl: USR1 ({spec.slurm.signal_seconds} s before the time limit): "
           "checkpoint and stop\" >&2; scancel --signal=TERM \"$SLURM_JOB_ID\" || true; }",
           "trap on_usr1 USR1",
           "set +e",
           "while :; do wait \"$TRAIN_PID\"; RC=$?; kill -0 \"$TRAIN_PID\" 2>/dev/null || break; done  "
           "# a trapped signal interrupts wait",
           "set -e"]
    if spec.slurm.requeue:
        out += ['if [ "$STOPPED" = 1 ] && [ "$RC" -ge 128 ]; then',
                '    echo "ddpctl: requeueing job $SLURM_JOB_ID; it resumes from its checkpoint" >&2',
                '    scontrol requeue "$SLURM_JOB_ID"',
                "fi"]
    out.append('exit "$RC"')
    return out


def render_text(spec: JobSpec) -> dict[str, str]:
    return {"job.sbatch": render(spec)}
