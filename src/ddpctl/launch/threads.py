"""The thread rule: OMP_NUM_THREADS from the CPUs a node can use and its processes (or at run time, in ddp-train)."""

from __future__ import annotations

from ddpctl.spec import JobSpec

# ------------------------------------------------------------------------------------------ threads

THREADS_ENV = "OMP_NUM_THREADS"
AUTO_THREADS_ENV = "DDP_TRAIN_THREADS"  # "auto": ddp-train sets the threads at run time (ddp_train.runtime.threads)
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
    """``OMP_NUM_THREADS`` when the CPUs are known here; otherwise ask the container's launcher to decide at run
    time (``DDP_TRAIN_THREADS=auto``, any command).

    Nothing when the user set ``OMP_NUM_THREADS`` (spec env / ``-e``): theirs reaches the processes.
    """
    if THREADS_ENV in spec.env_dict:
        return {}
    cpus = node_cpus(spec, host_cpus, sharing)
    if cpus is not None:
        return {THREADS_ENV: str(omp_threads(cpus, spec.procs_per_node))}
    # Decided in the container, for any program: ddp-train-launch (every node's launcher) exports the number
    # before torchrun starts the workers, and ddp-train decides the same again in each of them.
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
