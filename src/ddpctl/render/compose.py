"""docker-compose renderer (Compose spec; loads in docker-compose 1.29.2 and Compose v2).

Single host: one service per node named ``<job>-node-<i>`` (also its ``container_name`` and ``hostname``) on a
private bridge network ``<job>-net``; node 0 is the master; no published ports. Multi-host (``hosts`` with more
than one entry): one file per host, each with that host's node only, ``network_mode: host`` and the master's
real address (the first host). Commands and env come from :func:`ddpctl.launch.local_nodes`, the same contract
``ddpctl up`` uses (each node starts through ``ddp-train-launch``). ``user`` is written only when the spec sets
it (``ddpctl up`` defaults to the caller's uid:gid; a portable file cannot), with ``HOME=/tmp`` for non-root.

Compatibility: no service-level ``gpus:`` and no top-level ``name:`` (docker-compose 1.x rejects both); GPUs
are ``deploy.resources.reservations.devices``; ``ulimits`` are plain integers; every ``$`` in user text is
written as ``$$`` so compose does not interpolate it.
"""

from __future__ import annotations

from typing import Any

from ddpctl import launch
from ddpctl.render import escape_dollars, to_yaml
from ddpctl.spec import JobSpec, format_size
from ddpctl.targets import Support, Unsupported

TARGET = "compose"

# Compose honours every core spec field; the kubernetes/slurm sections are other targets' options.
SUPPORT = Support(TARGET, sections=("nccl",), honours=frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "device_ids", "backend", "port", "command", "env",
    "secret_env", "volumes", "workdir", "user", "ipc", "shm_size", "network", "hosts", "master_addr",
    "max_restarts", "memlock", "cpus_per_node", "memory_per_node",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
}), unsupported=(
    Unsupported("nodes MIN:MAX", lambda s: s.min_nodes is not None,
                "a compose file starts a fixed set of services with a static rendezvous at node 0, while "
                "torchrun's elastic c10d rendezvous needs nodes that may come and go",
                "give a fixed node count (restarts: max_restarts), or render a pytorchjob or a slurm script",
                fields=("min_nodes",)),
))


def _root_user(user: str) -> bool:
    return user.split(":", 1)[0] in ("0", "root")


def _gpu_devices(req: launch.GpuRequest) -> list[dict[str, Any]]:
    device: dict[str, Any] = {"driver": "nvidia"}
    if req.device_ids:
        device["device_ids"] = list(req.device_ids)
    else:
        device["count"] = req.count
    device["capabilities"] = ["gpu"]
    return [device]


def _service(spec: JobSpec, node: launch.NodeLaunch, *, host_network: bool, depends: bool) -> dict[str, Any]:
    svc: dict[str, Any] = {"image": spec.resolved_image, "container_name": node.name}
    if not host_network:
        svc["hostname"] = node.name  # Docker refuses a hostname together with network_mode: host
    svc["command"] = list(node.argv)
    env: dict[str, str | None] = dict(node.env)
    for secret in spec.secret_env:  # no value: docker-compose takes it from its environment (or .env)
        env[secret.name] = None
    if spec.user and not _root_user(spec.user):
        env.setdefault("HOME", "/tmp")  # a uid without a passwd entry in the image has HOME=/ (not writable)
    svc["environment"] = env
    svc["labels"] = dict(node.labels)
    if spec.user:
        svc["user"] = spec.user
    if spec.workdir:
        svc["working_dir"] = launch.CONTAINER_WORKDIR
    volumes = [v.host_str() for v in spec.volumes]  # absolute when load_spec resolved them (same as `up`)
    if spec.workdir:
        volumes.append(f"{spec.resolved_workdir}:{launch.CONTAINER_WORKDIR}")
    if volumes:
        svc["volumes"] = volumes
    if host_network:
        svc["network_mode"] = "host"
    else:
        svc["networks"] = [launch.network_name(spec)]
    if spec.ipc == "host":
        svc["ipc"] = "host"
    elif spec.shm_size:
        svc["shm_size"] = format_size(spec.shm_size)
    else:
        svc["ipc"] = "private"
    ulimits: dict[str, int] = {"stack": launch.STACK_ULIMIT}
    if spec.memlock:
        ulimits["memlock"] = -1
    svc["ulimits"] = ulimits
    if spec.cpus_per_node:
        svc["cpus"] = spec.cpus_per_node  # finite, whole millicores (rules.cpus)
    if spec.memory_per_node:
        svc["mem_limit"] = format_size(spec.memory_per_node)
    svc["restart"] = f"on-failure:{spec.max_restarts}" if spec.max_restarts else "no"
    if depends and node.rank > 0:
        svc["depends_on"] = [launch.node_name(spec, 0)]
    if not node.gpus.none:
        svc["deploy"] = {"resources": {"reservations": {"devices": _gpu_devices(node.gpus)}}}
    return escape_dollars(svc)


def render(spec: JobSpec) -> dict[str, Any]:
    """The single-host compose document (all nodes on one host). Multi-host specs: use :func:`render_files`."""
    SUPPORT.check(spec)
    if spec.multi_host:
        raise ValueError("multi-host specs render one file per host: use render_files()")
    host_network = spec.network == "host"
    services = {n.name: _service(spec, n, host_network=host_network, depends=True)
                for n in launch.local_nodes(spec)}
    doc: dict[str, Any] = {"services": services}
    if not host_network:
        doc["networks"] = {launch.network_name(spec): {"driver": "bridge"}}
    return doc


def file_name(spec: JobSpec, rank: int | None = None) -> str:
    """Default file names: ``compose.yaml``, or ``compose.node-<i>.yaml`` per host for multi-host."""
    return "compose.yaml" if rank is None else f"compose.node-{rank}.yaml"


def render_files(spec: JobSpec) -> dict[str, dict[str, Any]]:
    """File name -> compose document: one file, or one per host (host networking) for multi-host specs."""
    SUPPORT.check(spec)
    if not spec.multi_host:
        return {file_name(spec): render(spec)}
    return {
        file_name(spec, n.rank): {"services": {n.name: _service(spec, n, host_network=True, depends=False)}}
        for n in launch.local_nodes(spec)
    }


def header(spec: JobSpec, name: str) -> str:
    """A comment for the top of a written file: what it is and how to start it."""
    lines = [f"# ddpctl: job '{spec.name}', {spec.nodes} node(s) x {spec.procs_per_node} process(es), "
             f"backend {spec.resolved_backend}."]
    if spec.multi_host:
        rank = int(name.rsplit("node-", 1)[1].split(".")[0])
        lines.append(f"# Node {rank} of {spec.nodes}: run on host {spec.hosts[rank]} "
                     f"(master {launch.master_addr(spec)}:{spec.port}) with: docker-compose -f <this file> up")
    else:
        lines.append("# Start with: docker-compose -f <this file> up   (or: docker compose -f <this file> up)")
    if spec.secret_env:
        names = " ".join(e.name for e in spec.secret_env)
        lines.append(f"# Secrets, not in this file: set {names} in the environment of docker-compose (or .env).")
    return "\n".join(lines) + "\n"


def render_text(spec: JobSpec) -> dict[str, str]:
    """File name -> text: each document with its :func:`header`."""
    return {name: header(spec, name) + to_yaml(doc) for name, doc in render_files(spec).items()}
