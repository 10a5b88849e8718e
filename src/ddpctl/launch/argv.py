"""Every target's process environment, GPU requests per node and the torchrun command line."""

from __future__ import annotations

from ddpctl.launch.names import GpuRequest, user_command
from ddpctl.spec import JobSpec

# -------------------------------------------------------------------------------- env and argv

# ddp-train's NCCL socket rule (ddp_train.comm.socket_transport): "auto" = 4 threads x 4 sockets per connection unless the
# node has a usable InfiniBand device or the env sets them; "off" leaves NCCL's defaults. Set for GPU jobs of
# several nodes, where NCCL's traffic crosses the network.
NCCL_SOCKETS_ENV = "DDP_TRAIN_NCCL_SOCKETS"


def base_env(spec: JobSpec, threads: dict[str, str] | None = None) -> dict[str, str]:
    """Env every node gets from ddpctl on every target (``threads`` from :func:`thread_env`; user env last,
    so it wins)."""
    env = {"PYTHONUNBUFFERED": "1"}
    env.update(threads or {})
    if spec.nccl.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = spec.nccl.socket_ifname
        env["GLOO_SOCKET_IFNAME"] = spec.nccl.socket_ifname
    if spec.nccl.debug:
        env["NCCL_DEBUG"] = spec.nccl.debug
    if spec.nccl.ib_disable:
        env["NCCL_IB_DISABLE"] = "1"
    if spec.gpus_per_node and spec.nodes > 1:
        env[NCCL_SOCKETS_ENV] = "auto"  # decided in the node at run time (InfiniBand or not)
    env.update(spec.env_dict)
    return env


def gpu_requests(spec: JobSpec) -> list[GpuRequest]:
    """The GPUs each node gets. Several nodes on one host get disjoint ``device_ids``."""
    g = spec.gpus_per_node
    if not g:
        return [GpuRequest() for _ in range(spec.nodes)]
    if spec.nodes_per_host == 1:  # one node per host: every node takes the same GPUs of its host
        req = GpuRequest(device_ids=spec.device_ids[:g]) if spec.device_ids else GpuRequest(count=g)
        return [req for _ in range(spec.nodes)]
    ids = spec.device_ids or tuple(str(i) for i in range(spec.nodes * g))
    return [GpuRequest(device_ids=tuple(ids[i * g:(i + 1) * g])) for i in range(spec.nodes)]


def torchrun_argv(
    spec: JobSpec,
    *,
    nnodes: str | None = None,
    node_rank: str | None = None,
    master: str | None = None,
    master_port: str | None = None,
    rdzv_backend: str | None = None,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
    nproc_per_node: str | None = None,
    rdzv_conf: str | None = None,
    restarts: bool = True,
) -> list[str]:
    """``torchrun [topology flags] --no-python <user command>``; flags left None are omitted.

    ``restarts=False``: no ``--max-restarts`` (``ddpctl up`` restarts the whole job itself)."""
    argv = ["torchrun"]
    for flag, value in (
        ("--nnodes", nnodes),
        ("--nproc-per-node", nproc_per_node),
        ("--node-rank", node_rank),
        ("--master-addr", master),
        ("--master-port", master_port),
        ("--rdzv-backend", rdzv_backend),
        ("--rdzv-endpoint", rdzv_endpoint),
        ("--rdzv-id", rdzv_id),
        ("--rdzv-conf", rdzv_conf),
    ):
        if value is not None:
            argv += [flag, value]
    if spec.max_restarts and restarts:
        argv += ["--max-restarts", str(spec.max_restarts)]
    argv.append("--no-python")
    return argv + user_command(spec)
