"""The container model: spec -> one :class:`ContainerPlan` per node, the single translation of a node into a
container. Pure.

The launch contract (argv, env, GPUs, labels per node) comes from :func:`ddpctl.launch.local_nodes`; this module
adds the container around it (user, mounts, ipc/shm, ulimits, CPU/memory limits, restart policy, network). Two
serialisations of the same plan: :func:`container_request` (the Engine create request of ``ddpctl up``'s executor;
``--dry-run`` prints :meth:`LocalPlan.to_dict`) and :mod:`ddpctl.render.compose`. :func:`plan_containers`
resolves relative host paths for ``up`` (its working directory); compose keeps them relative to its file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ddpctl import launch
from ddpctl.local import restarts
from ddpctl.spec import JobSpec
from ddpctl.spec.units import docker_size
from ddpctl.targets import Support, Unsupported

# `ddpctl up` honours every core spec field; the kubernetes/slurm sections are other targets' options.
SUPPORT = Support("ddpctl up", sections=("nccl",), honours=frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "device_ids", "backend", "port", "command", "env",
    "secret_env", "volumes", "workdir", "user", "ipc", "shm_size", "network", "hosts", "docker_hosts",
    "master_addr", "max_restarts", "memlock", "cpus_per_node", "memory_per_node", "tensorboard",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
}), unsupported=(
    Unsupported("hosts without docker_hosts", lambda s: s.multi_host and not s.docker_hosts,
                "it would start every node on this one host",
                "name each node's Docker host with --docker-hosts URL,URL (or render one compose file per host with "
                "'ddpctl render compose --hosts ...' and run each there)", fields=()),
    Unsupported("nodes MIN:MAX", lambda s: s.min_nodes is not None,
                "it starts a fixed set of containers on this one host",
                "give a fixed node count (--max-restarts recovers lost nodes), or render a pytorchjob or slurm "
                "script for an elastic job", fields=("min_nodes",)),
))


@dataclass(frozen=True)
class Mount:
    source: str  # absolute host path, or a named volume
    target: str
    read_only: bool = False
    bind: bool = True


@dataclass(frozen=True)
class ContainerPlan:
    rank: int
    name: str
    hostname: str | None  # None with host networking (Docker refuses a hostname with network_mode: host)
    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    gpus: launch.GpuRequest
    network: str | None  # the job's private network; None with host networking
    ipc_mode: str | None  # "host", "private", or None: private with a /dev/shm of shm_size
    shm_size: int | None
    ulimits: tuple[tuple[str, int, int], ...]
    mounts: tuple[Mount, ...]
    working_dir: str | None
    cpus: float | None = None  # CPU limit (whole millicores, rules.cpus)
    mem_limit: int | None = None  # bytes
    secret_env: tuple[str, ...] = ()  # names whose values the executor reads from its environment at start
    user: str | None = None  # uid[:gid] or name; None: the image's user
    extra_env: tuple[tuple[str, str], ...] = ()  # after env and the secrets, unless they set it (HOME)
    max_restarts: int = 0  # restart the container on failure up to this many times (compose; see container_request)
    restart_argv: tuple[str, ...] | None = None  # up --max-restarts: the argv of a job restart (ddpctl.local.restarts)

    @property
    def nano_cpus(self) -> int | None:
        return round(self.cpus * 1000) * 10**6 if self.cpus else None

    def environment(self, secrets: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
        """env, then each secret name with its value from ``secrets`` (None: not given), then ``extra_env``."""
        env: dict[str, str | None] = dict(self.env)
        for name in self.secret_env:
            env[name] = secrets.get(name) if secrets is not None else None
        for k, v in self.extra_env:
            env.setdefault(k, v)
        return env

    def gpu_device_request(self) -> dict[str, Any] | None:
        """The one NVIDIA device request (Docker API shape); None on CPU, where a request would fail without
        the NVIDIA runtime."""
        if self.gpus.none:
            return None
        dev: dict[str, Any] = {"driver": "nvidia"}
        if self.gpus.device_ids:
            dev["device_ids"] = list(self.gpus.device_ids)
        else:
            dev["count"] = self.gpus.count
        dev["capabilities"] = [["gpu"]]
        return dev


@dataclass(frozen=True)
class LocalPlan:
    job: str
    image: str
    network: str | None
    network_labels: tuple[tuple[str, str], ...]
    containers: tuple[ContainerPlan, ...]
    port: int
    world_size: int
    host_network: bool
    max_restarts: int = 0  # job restarts after a retryable node failure (ddpctl.local.restarts)
    checkpoint_volume: str | None = None  # the named volume ddpctl creates for the checkpoints, if any
    docker_hosts: tuple[str, ...] = ()  # node i's Docker host (as given), or () for DOCKER_HOST's engine

    @property
    def gpus_total(self) -> int:
        ids = {i for c in self.containers for i in c.gpus.device_ids}
        counts = sum(c.gpus.count for c in self.containers)
        return len(ids) + counts

    @property
    def wants_gpus(self) -> bool:
        return any(not c.gpus.none for c in self.containers)

    def to_dict(self) -> dict[str, Any]:
        containers = [_masked(container_request(c)) for c in self.containers]
        for c, host in zip(containers, self.docker_hosts, strict=False):
            c["docker_host"] = host
        return {
            "job": self.job,
            "image": self.image,
            "world_size": self.world_size,
            "network": ({"name": self.network, "driver": "bridge", "labels": dict(self.network_labels)}
                        if self.network else "host"),
            **({"max_restarts": self.max_restarts, "checkpoint_dir": restarts.CHECKPOINT_DIR,
                "checkpoint_volume": ({"name": self.checkpoint_volume, "labels": dict(self.network_labels)}
                                      if self.checkpoint_volume else "mounted by the spec"),
                "restart_command": list(self.containers[0].restart_argv or ()) if self.containers else []}
               if self.max_restarts else {}),
            "containers": containers,
        }

    @property
    def secret_names(self) -> tuple[str, ...]:
        return self.containers[0].secret_env if self.containers else ()


def _masked(req: dict[str, Any]) -> dict[str, Any]:
    """A request for printing (``--dry-run``): secret references shown as such, secret-looking values masked."""
    from ddpctl.secrets import mask_env, mask_url_passwords

    shown = {**req, "environment": mask_env(req["environment"])}
    if isinstance(req.get("command"), list):
        shown["command"] = [mask_url_passwords(w) if isinstance(w, str) else w for w in req["command"]]
    return shown


def _mount(vol_source: str, target: str, read_only: bool, cwd: Path | None) -> Mount:
    """A bind mount of a host path (resolved against ``cwd`` unless it is None), or a named volume."""
    src = vol_source
    if src.startswith(("/", ".", "~")):
        if cwd is None:
            return Mount(src, target, read_only, True)
        path = Path(os.path.expanduser(src))
        if not path.is_absolute():
            path = cwd / path
        return Mount(os.path.normpath(str(path)), target, read_only, True)
    return Mount(src, target, read_only, False)  # a named volume


# A user that is not root may have no home directory in the image (no /etc/passwd entry: HOME=/), so torch
# and pip caches would fail to write; such containers get HOME=/tmp unless the job sets HOME itself.
NON_ROOT_HOME = "/tmp"


def is_root(user: str | None) -> bool:
    """Does ``user`` (uid[:gid] or name[:group]; None = the image's default, root) run as root?"""
    return user is None or user.split(":", 1)[0] in ("0", "root")


def plan_containers(spec: JobSpec, *, cwd: Path | None, default_user: str | None = None,
                    host_cpus: float | None = None, torchrun_restarts: bool = True) -> tuple[ContainerPlan, ...]:
    """One container per node of ``spec`` (every node, also for a multi-host spec: compose writes one file
    per host). ``cwd``: the directory relative host paths are resolved against; None keeps them as the spec
    has them (relative to a compose file). ``host_cpus`` (the engine host's CPUs) sets each process's
    ``OMP_NUM_THREADS`` (:func:`launch.thread_env`).

    ``default_user`` (``ddpctl up`` passes the caller's ``uid:gid``) is the containers' user when they
    bind-mount a host directory (``workdir``, a volume with a path) and the spec sets no ``user``, so files
    they write there belong to the caller. Without a bind mount the image's user (root) stays: nothing the
    job writes reaches the host, and the image's own directories (``/workspace``) are root's.
    ``torchrun_restarts=False`` (``up``): torchrun gets no ``--max-restarts``, the executor restarts the job.
    """
    host_network = spec.network == "host"
    network = None if host_network else launch.network_name(spec)
    mounts = [_mount(v.host_source, v.target, v.read_only, cwd) for v in spec.volumes]
    working_dir = None
    if spec.workdir:
        mounts.append(_mount(spec.resolved_workdir, launch.CONTAINER_WORKDIR, False, cwd))
        working_dir = launch.CONTAINER_WORKDIR
    elif spec.baked:  # the code is in the image (a pushed workspace image): its directory is the working one
        working_dir = launch.CONTAINER_WORKDIR
    ulimits = [("stack", launch.STACK_ULIMIT, launch.STACK_ULIMIT)]
    if spec.memlock:
        ulimits.append(("memlock", -1, -1))
    user = spec.user or (default_user if any(m.bind for m in mounts) else None)
    extra_env = () if is_root(user) else (("HOME", NON_ROOT_HOME),)
    if spec.ipc == "host":
        ipc_mode, shm_size = "host", None
    else:
        ipc_mode, shm_size = (None, spec.shm_size) if spec.shm_size else ("private", None)
    return tuple(ContainerPlan(
        rank=node.rank, name=node.name, hostname=None if host_network else node.name, image=spec.resolved_image,
        argv=node.argv, env=node.env, extra_env=extra_env, user=user, labels=node.labels, gpus=node.gpus,
        network=network, ipc_mode=ipc_mode, shm_size=shm_size, ulimits=tuple(ulimits), mounts=tuple(mounts),
        working_dir=working_dir, cpus=spec.cpus_per_node, mem_limit=spec.memory_per_node,
        secret_env=tuple(e.name for e in spec.secret_env), max_restarts=spec.max_restarts,
    ) for node in launch.local_nodes(spec, host_cpus=host_cpus, torchrun_restarts=torchrun_restarts))


def with_checkpoint_dir(containers: tuple[ContainerPlan, ...], job: str) -> tuple[tuple[ContainerPlan, ...], str | None]:
    """The containers with the job's checkpoint directory at /checkpoints (``DDPCTL_CHECKPOINTS``): the spec's
    own mount there, else the named volume ``<job>-ckpt`` (returned; None with the spec's mount)."""
    volume = None if any(m.target == restarts.CHECKPOINT_DIR for m in containers[0].mounts) else restarts.volume_name(job)
    extra = (Mount(volume, restarts.CHECKPOINT_DIR, False, False),) if volume else ()
    return tuple(replace(c, mounts=c.mounts + extra, env=c.env + ((restarts.CHECKPOINT_ENV, restarts.CHECKPOINT_DIR),))
                 for c in containers), volume


def plan_local(spec: JobSpec, *, cwd: Path, default_user: str | None = None,
               host_cpus: float | None = None) -> LocalPlan:
    """The containers and network of ``spec`` on this host (``ddpctl up``); see :func:`plan_containers`. With
    ``docker_hosts`` node *i* runs on Docker host *i* with host networking
    (:class:`ddpctl.dockerengine.hosts_engine.HostsEngine` places them)."""
    SUPPORT.check(spec)
    containers = plan_containers(spec, cwd=cwd, default_user=default_user, host_cpus=host_cpus, torchrun_restarts=False)
    volume = None
    if spec.max_restarts or spec.tensorboard:  # ddp-train's checkpoints, its event files (launch: --tensorboard)
        containers, volume = with_checkpoint_dir(containers, spec.name)
    if spec.max_restarts:  # ddpctl.local.restarts: the argv of the first start and of a restart
        containers = tuple(replace(c, argv=restarts.first_argv(c.argv), restart_argv=restarts.restart_argv(c.argv))
                           for c in containers)
    return LocalPlan(job=spec.name, image=spec.resolved_image, network=containers[0].network,
                     network_labels=tuple(launch.labels(spec).items()), containers=containers, port=spec.port,
                     world_size=spec.world_size, host_network=spec.network == "host", max_restarts=spec.max_restarts,
                     checkpoint_volume=volume, docker_hosts=spec.docker_hosts)


def container_request(c: ContainerPlan, secrets: Mapping[str, str] | None = None, *,
                      restart: int = 0) -> dict[str, Any]:
    """The Docker Engine create request for one node, as plain data (docker-py ``containers.create`` kwargs
    with ``device_requests``/``ulimits``/``mounts`` still as dicts; the engine adapter converts them).

    ``secrets``: the values of ``c.secret_env``, read by the executor from its environment when it starts the
    job; without them (a dry run) each one shows where its value will come from, never a value.
    ``restart``: how many times the job was restarted before this container (``up --max-restarts`` only)."""
    from ddpctl.secrets import FROM_ENV

    values = dict(secrets) if secrets is not None else {name: FROM_ENV for name in c.secret_env}
    req: dict[str, Any] = {"name": c.name}
    if c.hostname:
        req["hostname"] = c.hostname
    env, labels, command = c.environment(values), dict(c.labels), list(c.argv)
    if c.restart_argv is not None:
        env[restarts.RESTART_ENV] = str(restart)
        labels[restarts.LABEL_RESTARTS] = str(restart)
        if restart:
            command = list(c.restart_argv)
    req.update({
        "image": c.image,
        "command": command,
        "environment": env,
        "labels": labels,
        "ulimits": [{"name": n, "soft": s, "hard": h} for n, s, h in c.ulimits],
    })
    if c.network:
        req["network"] = c.network
    else:
        req["network_mode"] = "host"
    if c.ipc_mode:
        req["ipc_mode"] = c.ipc_mode
    if c.shm_size:
        req["shm_size"] = docker_size(c.shm_size)
    if c.mounts:
        req["mounts"] = [{"type": "bind" if m.bind else "volume", "source": m.source, "target": m.target,
                          "read_only": m.read_only} for m in c.mounts]
    if c.working_dir:
        req["working_dir"] = c.working_dir
    if c.user:
        req["user"] = c.user
    device = c.gpu_device_request()
    if device:
        req["device_requests"] = [device]
    if c.nano_cpus:
        req["nano_cpus"] = c.nano_cpus
    if c.mem_limit:
        req["mem_limit"] = c.mem_limit
    # No Docker restart policy from c.max_restarts: up's executor restarts the whole job (executor/supervise.py),
    # where a daemon restart would bring one failed node back behind its back. Compose writes the policy.
    return req
