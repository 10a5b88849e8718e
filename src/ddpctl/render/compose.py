"""docker-compose renderer (Compose spec; loads in docker-compose 1.29.2 and Compose v2).

Single host: one service per node named ``<job>-node-<i>`` (also its ``container_name`` and ``hostname``) on a
private bridge network ``<job>-net``; node 0 is the master; no published ports. Multi-host (``hosts`` with more
than one entry): one file per host, each with that host's node only, ``network_mode: host`` and the master's
real address (the first host). Each service serialises a :class:`~ddpctl.local.plan.ContainerPlan`, the same
container model ``ddpctl up`` creates (launch contract, mounts, ipc/shm, ulimits, limits, GPU request), so the
two cannot drift. ``user`` is written only when the spec sets it (``ddpctl up`` defaults to the caller's uid:gid;
a portable file cannot), with ``HOME=/tmp`` for non-root. Relative host paths stay relative to the file.
``tensorboard``: the job's checkpoint directory at /checkpoints, as ``ddpctl up`` has it (the spec's mount there,
else the volume ``<job>-ckpt``, declared with that name), holds ddp-train's event files.

Compatibility: no service-level ``gpus:`` and no top-level ``name:`` (docker-compose 1.x rejects both); GPUs
are ``deploy.resources.reservations.devices``; ``ulimits`` are plain integers; every ``$`` in user text is
written as ``$$`` so compose does not interpolate it.
"""

from __future__ import annotations

import shlex
from typing import Any

from ddpctl import launch
from ddpctl.local.plan import ContainerPlan, is_root, plan_containers, with_checkpoint_dir
from ddpctl.render import escape_dollars, to_yaml, workspace_section
from ddpctl.spec import JobSpec
from ddpctl.spec.units import docker_size
from ddpctl.targets import Support, Unsupported

TARGET = "compose"
CKPT = launch.CHECKPOINT_DIR

# Compose honours every core spec field but docker_hosts; the kubernetes/slurm sections are other targets' options.
SUPPORT = Support(TARGET, sections=("nccl", workspace_section.SECTION), honours=workspace_section.HONOURS | frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "device_ids", "backend", "port", "command", "env",
    "secret_env", "volumes", "workdir", "user", "ipc", "shm_size", "network", "hosts", "master_addr",
    "max_restarts", "memlock", "cpus_per_node", "memory_per_node", "tensorboard",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
}), unsupported=workspace_section.UNSUPPORTED + (
    Unsupported("nodes MIN:MAX", lambda s: s.min_nodes is not None,
                "a compose file starts a fixed set of services with a static rendezvous at node 0, while "
                "torchrun's elastic c10d rendezvous needs nodes that may come and go",
                "give a fixed node count (max_restarts for restarts), or render a pytorchjob or a slurm script",
                fields=("min_nodes",)),
    Unsupported("tensorboard on several hosts without a shared /checkpoints",
                lambda s: s.tensorboard and s.multi_host and not launch.mounts_checkpoint_dir(s),
                "each host's file would get a checkpoint volume of its own, and the event files belong in the job's "
                "one checkpoint directory", f"mount a directory every host sees there: -v /shared/ckpt:{CKPT}",
                fields=()),
    Unsupported("tensorboard as a user other than root without a volume at /checkpoints",
                lambda s: s.tensorboard and not is_root(s.user) and not launch.mounts_checkpoint_dir(s),
                "the job's new checkpoint volume belongs to root, so that user could not write the event files",
                f"mount a directory the user owns there: -v ./runs:{CKPT}", fields=()),
    Unsupported("docker_hosts", lambda s: bool(s.docker_hosts),
                "it says where 'ddpctl up' starts each node; a compose file runs wherever docker-compose points",
                "drop docker_hosts (keep hosts) and run each file on its host: "
                "DOCKER_HOST=URL docker-compose -f compose.node-<i>.yaml up"),
))


def _service(c: ContainerPlan, *, depends_on: str | None = None) -> dict[str, Any]:
    """One node's container (:mod:`ddpctl.local.plan`, the model `ddpctl up` creates too) as a compose service."""
    svc: dict[str, Any] = {"image": c.image, "container_name": c.name}
    if c.hostname:
        svc["hostname"] = c.hostname
    svc["command"] = list(c.argv)
    svc["environment"] = c.environment()  # a secret has no value: docker-compose takes it from its environment
    svc["labels"] = dict(c.labels)
    if c.user:
        svc["user"] = c.user
    if c.working_dir:
        svc["working_dir"] = c.working_dir
    if c.mounts:
        svc["volumes"] = [f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in c.mounts]
    if c.network:
        svc["networks"] = [c.network]
    else:
        svc["network_mode"] = "host"
    if c.ipc_mode:
        svc["ipc"] = c.ipc_mode
    if c.shm_size:
        svc["shm_size"] = docker_size(c.shm_size)
    svc["ulimits"] = {n: soft if soft == hard else {"soft": soft, "hard": hard} for n, soft, hard in c.ulimits}
    if c.cpus:
        svc["cpus"] = c.cpus  # finite, whole millicores (rules.cpus)
    if c.mem_limit:
        svc["mem_limit"] = docker_size(c.mem_limit)
    svc["restart"] = f"on-failure:{c.max_restarts}" if c.max_restarts else "no"
    if depends_on:
        svc["depends_on"] = [depends_on]
    device = c.gpu_device_request()
    if device:  # compose lists the capabilities flat (one set); the Engine API takes a list of sets
        device["capabilities"] = [cap for group in device["capabilities"] for cap in group]
        svc["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    return escape_dollars(svc)


def _containers(spec: JobSpec) -> tuple[ContainerPlan, ...]:
    # Host paths stay as the spec has them: load_spec made them absolute; otherwise docker-compose resolves them
    # against the file's directory. No default user: a file to share cannot know who will run it.
    containers = plan_containers(spec, cwd=None)
    if spec.tensorboard:  # the event files go to the job's checkpoint directory, as with ddpctl up
        containers, _ = with_checkpoint_dir(containers, spec.name)
    return containers


def _checkpoint_volume(spec: JobSpec) -> dict[str, Any]:
    """The top-level declaration of the job's checkpoint volume ``<job>-ckpt`` (the name ``ddpctl up`` gives it,
    without compose's project prefix), when the job uses one."""
    if not spec.tensorboard or launch.mounts_checkpoint_dir(spec):
        return {}
    name = launch.checkpoint_volume(spec.name)
    return {"volumes": {name: {"name": name, "labels": launch.labels(spec)}}}


def render(spec: JobSpec) -> dict[str, Any]:
    """The single-host compose document (all nodes on one host). Multi-host specs: use :func:`render_files`."""
    SUPPORT.check(spec)
    if spec.multi_host:
        raise ValueError("multi-host specs render one file per host: use render_files()")
    containers = _containers(spec)
    master = containers[0].name
    doc: dict[str, Any] = {"services": {c.name: _service(c, depends_on=master if c.rank else None)
                                        for c in containers}}
    if containers[0].network:
        doc["networks"] = {containers[0].network: {"driver": "bridge"}}
    doc.update(_checkpoint_volume(spec))
    return doc


def file_name(spec: JobSpec, rank: int | None = None) -> str:
    """Default file names: ``compose.yaml``, or ``compose.node-<i>.yaml`` per host for multi-host."""
    return "compose.yaml" if rank is None else f"compose.node-{rank}.yaml"


def render_files(spec: JobSpec) -> dict[str, dict[str, Any]]:
    """File name -> compose document: one file, or one per host (host networking) for multi-host specs."""
    SUPPORT.check(spec)
    if not spec.multi_host:
        return {file_name(spec): render(spec)}
    return {file_name(spec, c.rank): {"services": {c.name: _service(c)}} for c in _containers(spec)}


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
    if spec.tensorboard:
        who = "ddp-train writes" if launch.user_command(spec)[0].rsplit("/", 1)[-1] == "ddp-train" else \
            "DDPCTL_TENSORBOARD tells your program to write"
        lines.append(f"# TensorBoard: {who} event files in {launch.TENSORBOARD_DIR}" + _tensorboard_hint(spec))
    if spec.secret_env:
        names = " ".join(e.name for e in spec.secret_env)
        lines.append(f"# Secrets, not in this file: set {names} in the environment of docker-compose (or .env).")
    return "\n".join(lines) + "\n"


def _tensorboard_hint(spec: JobSpec) -> str:
    """Where the event files are on the host and how to look at them (rank 0, in node 0's container)."""
    mount = next((v for v in spec.volumes if v.target == launch.CHECKPOINT_DIR), None)
    if mount is not None and mount.source.startswith(("/", ".", "~")):
        path = mount.source.rstrip("/") + "/tensorboard"
        where = f"host {spec.hosts[0]} (node 0's)" if spec.multi_host else "this host"
        return f", which is {path} on {where}: tensorboard --logdir {shlex.quote(path)}"
    container, local = f"{spec.name}-node-0", f"./{spec.name}-tensorboard"
    volume = mount.source if mount is not None else launch.checkpoint_volume(spec.name)
    return (f" on volume {volume}; copy them out with: docker cp {container}:{launch.TENSORBOARD_DIR} {local}, "
            f"then: tensorboard --logdir {local}")


def render_text(spec: JobSpec) -> dict[str, str]:
    """File name -> text: each document with its :func:`header`."""
    return {name: header(spec, name) + to_yaml(doc) for name, doc in render_files(spec).items()}
