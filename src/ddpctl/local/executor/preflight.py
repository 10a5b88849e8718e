"""Preflight: everything that would make ``up`` fail is found before anything is created.

Engine reachable, GPUs, image present, name clashes, bind sources, the host port; and the secret values read
from the caller's environment. Raises one-line usage/engine errors; creates nothing.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
from typing import Callable, Mapping

from ddpctl.errors import EngineError, UsageError
from ddpctl.launch import LABEL_JOB, job_label
from ddpctl.local.engine_interface import ContainerInfo, Engine
from ddpctl.local.plan import LocalPlan


def port_free(port: int) -> bool:
    """Can a process on this host listen on ``port`` (host networking)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def preflight(plan: LocalPlan, engine: Engine, *, host_gpus: int,
              port_check: Callable[[int], bool] = port_free) -> list[ContainerInfo]:
    """Raise on anything that would make ``up`` fail; return a finished earlier run to replace."""
    engine.ping()
    if plan.wants_gpus:
        need = plan.gpus_total
        per = plan.containers[0].gpus
        ids = sorted({int(i) for c in plan.containers for i in c.gpus.device_ids if i.isdigit()})
        if need > host_gpus or (ids and ids[-1] >= host_gpus):
            what = f"GPU ids {','.join(map(str, ids))}" if per.device_ids else f"{need} GPU(s)"
            raise UsageError(f"job {plan.job} asks for {what} but this host has {host_gpus} GPU(s)",
                             "lower --gpus-per-node / --nodes, or use --gpus-per-node 0 for a CPU run")
        if not engine.has_nvidia_runtime(plan.image):
            raise EngineError("the Docker Engine has no NVIDIA runtime, so containers cannot get GPUs",
                              "install nvidia-container-toolkit and restart dockerd")
    if not engine.image_exists(plan.image):
        raise UsageError(f"image {plan.image} is not present on this Docker Engine",
                         "build it with 'make image-cpu' (CPU) / 'make image' (CUDA), or pass --image")
    existing = clashes(plan, engine)
    if _engine_is_local():
        for m in plan.containers[0].mounts if plan.containers else ():
            if m.bind and not os.path.exists(m.source):
                raise UsageError(f"bind-mount source {m.source} (for {m.target}) does not exist on this host",
                                 "create it or fix the path given to --volume / --workdir")
    if plan.host_network and not port_check(plan.port):
        raise UsageError(f"port {plan.port} is already in use on this host (host networking)",
                         "pick a free one with --port, or stop what listens on it")
    return existing


def clashes(plan: LocalPlan, engine: Engine) -> list[ContainerInfo]:
    """Refuse a running job of the same name and containers/networks of that name that are not the job's;
    return the job's finished earlier run (to replace)."""
    existing = engine.containers(label=job_label(plan.job))
    running = [c for c in existing if c.running]
    if running:
        where = sorted({c.host for c in running if c.host})
        on = f" on Docker host(s) {', '.join(where)}" if where else ""
        raise UsageError(f"job {plan.job} is already running ({len(running)} container(s){on})",
                         f"stop it with '{shlex.join(['ddpctl', 'down', plan.job])}' or choose another --name")
    mine = {c.id for c in existing}
    for c in plan.containers:
        for other in engine.containers(name=c.name):
            if other.id not in mine:
                on = f" on Docker host {other.host}" if other.host else ""
                raise UsageError(f"a container named {c.name} already exists{on} and is not part of job {plan.job}",
                                 f"remove it ('{shlex.join(['docker', 'rm', '-f', c.name])}') or choose another --name")
    if plan.network:
        for net in engine.networks(name=plan.network):
            if net.labels.get(LABEL_JOB) != plan.job:
                raise UsageError(f"a network named {plan.network} already exists and is not job {plan.job}'s",
                                 f"remove it ('{shlex.join(['docker', 'network', 'rm', plan.network])}') or choose another --name")
    if plan.checkpoint_volume:
        for vol in engine.volumes(name=plan.checkpoint_volume):
            if vol.labels.get(LABEL_JOB) != plan.job:
                raise UsageError(f"a volume named {plan.checkpoint_volume} already exists and is not job "
                                 f"{plan.job}'s checkpoint volume",
                                 f"remove it ('{shlex.join(['docker', 'volume', 'rm', plan.checkpoint_volume])}'), choose another --name, "
                                 f"or mount it yourself with -v {plan.checkpoint_volume}:/checkpoints")
    return existing


def host_cpus(engine: Engine | None = None) -> int | None:
    """CPUs of the host the containers run on (sets each process's OMP_NUM_THREADS, see ddpctl.launch).

    A local engine (unix socket) shares this machine's CPUs; a remote one is asked (``docker info`` NCPU). None
    for an engine over several Docker hosts (``node_per_host``): each container sets its threads from its host's.
    """
    if engine is not None and engine.node_per_host:
        return None
    if engine is not None and not _engine_is_local():
        try:
            client = getattr(engine, "client", None)  # DockerEngine; other engines cannot say
            ncpu = int(client.info().get("NCPU") or 0) if client is not None else 0
            if ncpu > 0:
                return ncpu
        except Exception:  # noqa: BLE001 - an engine that cannot say: assume this machine's count
            pass
    return os.cpu_count() or 1


def _engine_is_local() -> bool:
    """Bind sources can be checked only when the engine runs on this machine (a unix socket)."""
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


def secret_values(plan: LocalPlan, environ: Mapping[str, str]) -> dict[str, str]:
    """The values of the plan's secret references, from ``environ`` (the caller's environment, read now)."""
    missing = [n for n in plan.secret_names if n not in environ]
    if missing:
        names = ", ".join(missing)
        raise UsageError(f"secret env {names} is not set in this environment (--secret-env takes the value from "
                         "the environment of ddpctl up)", f"export {missing[0]}=... and run 'ddpctl up' again")
    return {n: environ[n] for n in plan.secret_names}

