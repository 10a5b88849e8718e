"""Pieces shared by the PyTorchJob and TrainJob renderers (pure)."""

from __future__ import annotations

from typing import Any

from ddpctl import launch, rules
from ddpctl.render import workspace_section
from ddpctl.spec import JobSpec, format_size
from ddpctl.targets import Unsupported

DSHM_VOLUME = "dshm"
GPU_RESOURCE = "nvidia.com/gpu"
ISTIO_ANNOTATION = "sidecar.istio.io/inject"
KUEUE_LABEL = "kueue.x-k8s.io/queue-name"

# What both Kubernetes targets carry into the pods. ipc: the pods' IPC namespace is always their own, with a
# memory-backed /dev/shm of shm_size (or kubernetes.shm_size).
COMMON_HONOURS = frozenset({
    "name", "image", "nodes", "gpus_per_node", "nproc_per_node", "backend", "command", "env", "secret_env",
    "volumes", "ipc", "shm_size", "max_restarts", "memlock", "cpus_per_node", "memory_per_node", "tensorboard",
    "nccl.socket_ifname", "nccl.debug", "nccl.ib_disable",
    "kubernetes.namespace", "kubernetes.active_deadline_seconds", "kubernetes.kueue_queue",
    "kubernetes.istio_sidecar", "kubernetes.node_selector", "kubernetes.tolerations", "kubernetes.service_account",
    "kubernetes.shm_size",
}) | workspace_section.HONOURS
SECTIONS = ("nccl", "kubernetes", workspace_section.SECTION)

# Spec features that make sense for Docker/Slurm but not for a pod that Kubernetes places itself.
COMMON_UNSUPPORTED: tuple[Unsupported, ...] = workspace_section.UNSUPPORTED + (
    Unsupported("tensorboard without a volume at /checkpoints",
                lambda s: s.tensorboard and not launch.mounts_checkpoint_dir(s),
                f"ddp-train writes the event files to {launch.TENSORBOARD_DIR}, and a pod's own file system goes "
                "with the pod", f"mount storage every pod sees there: -v /mnt/shared/ckpt:{launch.CHECKPOINT_DIR}",
                fields=()),
    Unsupported("hosts", lambda s: bool(s.hosts), "Kubernetes places pods on nodes itself",
                "drop hosts, or use kubernetes.node_selector"),
    Unsupported("docker_hosts", lambda s: bool(s.docker_hosts), "Kubernetes runs the pods, not Docker hosts",
                "drop docker_hosts"),
    Unsupported("master_addr", lambda s: s.master_addr is not None,
                "the operator sets the master address", "drop master_addr"),
    Unsupported("device_ids", lambda s: bool(s.device_ids), "the NVIDIA device plugin picks the GPUs",
                "drop device_ids; gpus_per_node is the request"),
    Unsupported("workdir", lambda s: s.workdir is not None,
                "a directory on this machine cannot be mounted into a cluster pod",
                "bake the code into an image with --push REGISTRY/NAME (ddpctl builds, pushes and pins it), or "
                "mount it with an absolute volume path on the nodes"),
    Unsupported("secret_env without a Kubernetes Secret", lambda s: any(e.secret is None for e in s.secret_env),
                "the pods read the value from a Secret in the job's namespace",
                "name it: --secret-env NAME=SECRET[:KEY] (secret_env: {NAME: SECRET:KEY} in the file)", fields=()),
    Unsupported("user", lambda s: s.user is not None,
                "a pod's user comes from its securityContext (runAsUser/runAsGroup) or the image",
                "drop user; set securityContext.runAsUser/runAsGroup with a kustomize patch or the cluster's "
                "policy"),
    Unsupported("relative volume sources", lambda s: any(not v.source.startswith("/") for v in s.volumes),
                "volumes become hostPath mounts, which need absolute paths on the cluster nodes",
                "give absolute volume sources", fields=()),
)


def env_list(spec: JobSpec) -> list[dict[str, Any]]:
    """The container env (``$`` escaped so the kubelet does not expand ``$(VAR)`` in user values), then the
    secret references as ``valueFrom.secretKeyRef`` (the value stays in the Secret)."""
    out: list[dict[str, Any]] = [{"name": k, "value": v.replace("$", "$$")}
                                 for k, v in launch.operator_env(spec).items()]
    for s in spec.secret_env:
        out.append({"name": s.name, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": s.secret_key}}})
    return out


def command(spec: JobSpec) -> list[str]:
    return [w.replace("$", "$$") for w in launch.operator_command(spec)]


def resources(spec: JobSpec) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if spec.gpus_per_node:
        limits[GPU_RESOURCE] = spec.gpus_per_node
    if spec.cpus_per_node:
        limits["cpu"] = requests["cpu"] = rules.cpu_quantity(spec.cpus_per_node)
    if spec.memory_per_node:
        limits["memory"] = requests["memory"] = format_size(spec.memory_per_node, "k8s")
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def shm_bytes(spec: JobSpec) -> int:
    return spec.shm_size or spec.kubernetes.shm_size


def volumes(spec: JobSpec) -> list[dict[str, Any]]:
    """``/dev/shm`` as a memory-backed emptyDir (counts against the memory limit) plus hostPath volumes."""
    out: list[dict[str, Any]] = [{"name": DSHM_VOLUME, "emptyDir": {"medium": "Memory",
                                                                   "sizeLimit": format_size(shm_bytes(spec), "k8s")}}]
    for i, v in enumerate(spec.volumes):
        out.append({"name": f"vol-{i}", "hostPath": {"path": v.source}})
    return out


def volume_mounts(spec: JobSpec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": DSHM_VOLUME, "mountPath": "/dev/shm"}]
    for i, v in enumerate(spec.volumes):
        m: dict[str, Any] = {"name": f"vol-{i}", "mountPath": v.target}
        if v.read_only:
            m["readOnly"] = True
        out.append(m)
    return out


def security_context(spec: JobSpec) -> dict[str, Any] | None:
    """``memlock`` maps to the IPC_LOCK capability (RDMA/InfiniBand pinning); pods have no ulimits."""
    if spec.memlock:
        return {"capabilities": {"add": ["IPC_LOCK"]}}
    return None


def placement(spec: JobSpec) -> dict[str, Any]:
    """Pod-spec fields that choose where and as whom the pods run (same keys in PyTorchJob and TrainJob)."""
    k = spec.kubernetes
    out: dict[str, Any] = {}
    if k.service_account:
        out["serviceAccountName"] = k.service_account
    if k.node_selector:
        out["nodeSelector"] = dict(k.node_selector)
    if k.tolerations:
        out["tolerations"] = [dict(t) for t in k.tolerations]
    return out


def pod_annotations(spec: JobSpec) -> dict[str, str]:
    return {} if spec.kubernetes.istio_sidecar else {ISTIO_ANNOTATION: "false"}


def job_labels(spec: JobSpec) -> dict[str, str]:
    out = launch.labels(spec)
    if spec.kubernetes.kueue_queue:
        out[KUEUE_LABEL] = spec.kubernetes.kueue_queue
    return out


def metadata(spec: JobSpec) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": spec.name}
    if spec.kubernetes.namespace:
        meta["namespace"] = spec.kubernetes.namespace
    meta["labels"] = job_labels(spec)
    return meta


def working_dir(spec: JobSpec) -> dict[str, Any]:
    """``workingDir: /workspace`` when the code is baked into the image (it is the image's WORKDIR too)."""
    return {"workingDir": launch.CONTAINER_WORKDIR} if spec.baked else {}
