"""The plan (which checks a target needs, pure) and the executor that runs them over probes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from ddpctl.doctor.cluster import (
    check_container_runtime,
    check_context,
    check_crds,
    check_kubectl,
    check_partitions,
    check_slurm_commands,
)
from ddpctl.doctor.engine_checks import check_docker, check_driver, check_gpus, check_nvidia_runtime
from ddpctl.doctor.host_checks import (
    check_ib,
    check_memlock,
    check_port,
    check_shm,
    check_socket_ifname,
    check_stack,
)
from ddpctl.doctor.model import Check, Options, Probes
from ddpctl.doctor.storage import check_checkpoint_space

# ------------------------------------------------------------------------------------------ the plan

def plan(opts: Options) -> list[str]:
    """Names of the checks the target needs, in the order they are reported."""
    out: list[str] = []
    if opts.target in ("local", "compose"):
        out += ["docker"]
        if opts.gpus_per_node:
            out += ["nvidia-runtime", "gpus", "driver"]
    if opts.target == "k8s":
        out += ["kubectl", "context", "crds"]
    if opts.target == "slurm":
        out += ["slurm-commands", "partitions"]
        if opts.container != "none":
            out += ["container-runtime"]
    if opts.target != "k8s":
        out += ["shm", "memlock", "stack", "port"]
    if opts.target in ("local", "compose") and (opts.checkpoint_dir or opts.checkpoint_size):
        out += ["checkpoint-space"]
    out += ["ib", "socket-ifname"]
    return out


def run(opts: Options, probes: Probes) -> list[Check]:
    """Evaluate the plan's checks (the executor)."""
    results: list[Check] = []
    state: dict = {}
    for name in plan(opts):
        got = CHECKS[name](opts, probes, state)
        results.extend(got if isinstance(got, list) else [got])
    return results


def failed(results: list[Check]) -> bool:
    return any(c.status == "fail" for c in results)


def to_json(opts: Options, results: list[Check]) -> dict:
    return {"target": opts.target, "ok": not failed(results), "checks": [asdict(c) for c in results]}


# -------------------------------------------------------------------------------- registry

CHECKS: dict[str, Callable] = {
    "docker": check_docker, "nvidia-runtime": check_nvidia_runtime, "gpus": check_gpus, "driver": check_driver,
    "kubectl": check_kubectl, "context": check_context, "crds": check_crds,
    "slurm-commands": check_slurm_commands, "partitions": check_partitions,
    "container-runtime": check_container_runtime,
    "shm": check_shm, "memlock": check_memlock, "stack": check_stack, "port": check_port,
    "ib": check_ib, "socket-ifname": check_socket_ifname, "checkpoint-space": check_checkpoint_space,
}
