"""Plan a local job (``ddpctl up``): spec -> the exact containers and network to create. Pure.

The launch contract (argv, env, GPUs, labels per node) comes from :func:`ddpctl.launch.local_nodes`, the
same function the compose renderer uses; this module only adds what is specific to the Docker Engine API
(mount paths resolved against a given directory, ipc/shm, ulimits, the network). ``--dry-run`` prints
:meth:`LocalPlan.to_dict`, and :func:`container_request` is exactly what the executor sends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ddpctl import launch
from ddpctl.spec import JobSpec, format_size
from ddpctl.targets import Support, Unsupported

# `ddpctl up` honours every core spec field; the kubernetes/slurm sections are other targets' options.
SUPPORT = Support("ddpctl up", sections=("nccl",), honours=frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "device_ids", "backend", "port", "command", "env",
    "secret_env", "volumes", "workdir", "user", "ipc", "shm_size", "network", "hosts", "master_addr",
    "max_restarts", "memlock", "cpus_per_node", "memory_per_node",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
}), unsupported=(
    Unsupported("hosts", lambda s: s.multi_host, "it starts every node on this one host",
                "render one compose file per host with 'ddpctl render compose --hosts ...' and run each there",
                fields=()),
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
    hostname: str
    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    gpus: launch.GpuRequest
    network: str | None  # the job's private network; None with host networking
    ipc_mode: str | None  # "host" or None (private, with shm_size)
    shm_size: int | None
    ulimits: tuple[tuple[str, int, int], ...]
    mounts: tuple[Mount, ...]
    working_dir: str | None
    nano_cpus: int | None = None
    mem_limit: int | None = None
    secret_env: tuple[str, ...] = ()  # names whose values the executor reads from its environment at start
    user: str | None = None  # uid[:gid] or name; None: the image's user


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

    @property
    def gpus_total(self) -> int:
        ids = {i for c in self.containers for i in c.gpus.device_ids}
        counts = sum(c.gpus.count for c in self.containers)
        return len(ids) + counts

    @property
    def wants_gpus(self) -> bool:
        return any(not c.gpus.none for c in self.containers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "image": self.image,
            "world_size": self.world_size,
            "network": ({"name": self.network, "driver": "bridge", "labels": dict(self.network_labels)}
                        if self.network else "host"),
            "containers": [_masked(container_request(c)) for c in self.containers],
        }

    @property
    def secret_names(self) -> tuple[str, ...]:
        return self.containers[0].secret_env if self.containers else ()


def _masked(req: dict[str, Any]) -> dict[str, Any]:
    """A request for printing (``--dry-run``): secret references shown as such, secret-looking values masked."""
    from ddpctl.secrets import mask_env

    return {**req, "environment": mask_env(req["environment"])}


def _mount(vol_source: str, target: str, read_only: bool, cwd: Path) -> Mount:
    src = vol_source
    if src.startswith(("/", ".", "~")):
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


def plan_local(spec: JobSpec, *, cwd: Path, default_user: str | None = None,
               host_cpus: float | None = None) -> LocalPlan:
    """The containers of ``spec`` on this host. ``cwd`` resolves relative volume and workdir paths;
    ``host_cpus`` (the engine host's CPUs) sets each process's ``OMP_NUM_THREADS`` (:func:`launch.thread_env`).

    ``default_user`` (``ddpctl up`` passes the caller's ``uid:gid``) is the containers' user when they
    bind-mount a host directory (``workdir``, a volume with a path) and the spec sets no ``user``, so files
    they write there belong to the caller. Without a bind mount the image's user (root) stays: nothing the
    job writes reaches the host, and the image's own directories (``/workspace``) are root's.
    """
    SUPPORT.check(spec)
    host_network = spec.network == "host"
    network = None if host_network else launch.network_name(spec)
    mounts = [_mount(v.host_source, v.target, v.read_only, cwd) for v in spec.volumes]
    working_dir = None
    if spec.workdir:
        mounts.append(_mount(spec.resolved_workdir, launch.CONTAINER_WORKDIR, False, cwd))
        working_dir = launch.CONTAINER_WORKDIR
    ulimits = [("stack", launch.STACK_ULIMIT, launch.STACK_ULIMIT)]
    if spec.memlock:
        ulimits.append(("memlock", -1, -1))
    user = spec.user or (default_user if any(m.bind for m in mounts) else None)
    containers = []
    for node in launch.local_nodes(spec, host_cpus=host_cpus):
        env = node.env
        if not is_root(user) and "HOME" not in node.env_dict:
            env = env + (("HOME", NON_ROOT_HOME),)
        containers.append(ContainerPlan(
            rank=node.rank, name=node.name, hostname=node.name, image=spec.resolved_image,
            argv=node.argv, env=env, user=user, labels=node.labels, gpus=node.gpus, network=network,
            ipc_mode="host" if spec.ipc == "host" else None,
            shm_size=spec.shm_size if spec.ipc != "host" else None,
            ulimits=tuple(ulimits), mounts=tuple(mounts), working_dir=working_dir,
            nano_cpus=round(spec.cpus_per_node * 1000) * 10**6 if spec.cpus_per_node else None,
            mem_limit=spec.memory_per_node,
            secret_env=tuple(e.name for e in spec.secret_env),
        ))
    return LocalPlan(job=spec.name, image=spec.resolved_image, network=network,
                     network_labels=tuple(launch.labels(spec).items()), containers=tuple(containers),
                     port=spec.port, world_size=spec.world_size, host_network=host_network)


def container_request(c: ContainerPlan, secrets: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Docker Engine create request for one node, as plain data (docker-py ``containers.create`` kwargs
    with ``device_requests``/``ulimits``/``mounts`` still as dicts; the engine adapter converts them).

    ``secrets``: the values of ``c.secret_env``, read by the executor from its environment when it starts the
    job; without them (a dry run) each one shows where its value will come from, never a value."""
    from ddpctl.secrets import FROM_ENV

    env: dict[str, str] = dict(c.env)
    for name in c.secret_env:
        env[name] = secrets[name] if secrets is not None else FROM_ENV
    req: dict[str, Any] = {
        "name": c.name,
        "hostname": c.hostname,
        "image": c.image,
        "command": list(c.argv),
        "environment": env,
        "labels": dict(c.labels),
        "ulimits": [{"name": n, "soft": s, "hard": h} for n, s, h in c.ulimits],
    }
    if c.network:
        req["network"] = c.network
    else:
        req["network_mode"] = "host"
    if c.ipc_mode:
        req["ipc_mode"] = c.ipc_mode
    if c.shm_size:
        req["shm_size"] = format_size(c.shm_size)
    if c.mounts:
        req["mounts"] = [{"type": "bind" if m.bind else "volume", "source": m.source, "target": m.target,
                          "read_only": m.read_only} for m in c.mounts]
    if c.working_dir:
        req["working_dir"] = c.working_dir
    if c.user:
        req["user"] = c.user
    if not c.gpus.none:  # never a device request on CPU: it fails without the NVIDIA runtime
        dev: dict[str, Any] = {"driver": "nvidia", "capabilities": [["gpu"]]}
        if c.gpus.device_ids:
            dev["device_ids"] = list(c.gpus.device_ids)
        else:
            dev["count"] = c.gpus.count
        req["device_requests"] = [dev]
    if c.nano_cpus:
        req["nano_cpus"] = c.nano_cpus
    if c.mem_limit:
        req["mem_limit"] = c.mem_limit
    return req
