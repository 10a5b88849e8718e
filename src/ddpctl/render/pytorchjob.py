"""Kubeflow PyTorchJob (``kubeflow.org/v1``, Training Operator v1.9.4) renderer.

Explicit ``Master: replicas: 1`` (the webhook rejects a nil value) plus ``Worker: replicas: N-1`` (no Worker for
one node). The container is named ``pytorch``, exposes ``pytorchjob-port`` (the operator takes MASTER_PORT from
it), and runs ``torchrun --no-python CMD`` with no topology flags: torchrun reads the ``PET_*`` env the operator
injects (see tests/support/k8s_contract.py). ``nprocPerNode`` is explicit, ``/dev/shm`` is a memory-backed
emptyDir, and ``runPolicy`` cleans up running workers once the master is done.

Elastic (``nodes: MIN:MAX``): ``Worker: replicas: MAX`` only (no Master: the operator's elastic contract has
every pod rendezvous at ``<job>-worker-0``) and ``elasticPolicy`` {minReplicas, maxReplicas, rdzvBackend c10d,
rdzvId, maxRestarts}, from which the operator gives torchrun ``PET_NNODES=MIN:MAX``, ``PET_RDZV_ENDPOINT``,
``PET_RDZV_BACKEND`` and ``PET_MAX_RESTARTS``. A job that is meant to survive a lost node (elastic, or
``max_restarts``) gets ``restartPolicy: ExitCode`` unless one is given (the operator recreates a pod that exited
with >= 128, fails the job on < 128) and ddp-train resumes from ``/checkpoints`` on every start.
"""

from __future__ import annotations

from typing import Any

from ddpctl.render import kubernetes_pod, to_yaml
from ddpctl.spec import JobSpec, KubernetesOptions
from ddpctl.targets import Support, Unsupported

TARGET = "pytorchjob"
API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"

SUPPORT = Support(TARGET, sections=kubernetes_pod.SECTIONS, honours=kubernetes_pod.COMMON_HONOURS | {
    "port", "network", "kubernetes.restart_policy", "kubernetes.backoff_limit", "kubernetes.clean_pod_policy",
    "kubernetes.ttl_seconds_after_finished", "kubernetes.gang", "kubernetes.scheduler_name", "kubernetes.queue",
    "kubernetes.priority_class", "min_nodes",
}, unsupported=kubernetes_pod.COMMON_UNSUPPORTED + (
    Unsupported("kubernetes.runtime", lambda s: s.kubernetes.runtime != KubernetesOptions().runtime,
                "the runtime is a TrainJob (v2) setting", "drop kubernetes.runtime, or render a trainjob"),
))


def _container(spec: JobSpec) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.resolved_image,
        "command": kubernetes_pod.command(spec),
        **kubernetes_pod.working_dir(spec),
        "env": kubernetes_pod.env_list(spec),
        "ports": [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
    }
    res = kubernetes_pod.resources(spec)
    if res:
        c["resources"] = res
    c["volumeMounts"] = kubernetes_pod.volume_mounts(spec)
    sc = kubernetes_pod.security_context(spec)
    if sc:
        c["securityContext"] = sc
    return c


def _pod_template(spec: JobSpec) -> dict[str, Any]:
    k = spec.kubernetes
    meta: dict[str, Any] = {"labels": kubernetes_pod.job_labels(spec)}
    annotations = kubernetes_pod.pod_annotations(spec)
    if annotations:
        meta["annotations"] = annotations
    pod: dict[str, Any] = {}
    if spec.network == "host":
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        # One pod per Kubernetes node, or two pods' torchrun would fight over the host port.
        pod["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": spec.name}},
            "topologyKey": "kubernetes.io/hostname",
        }]}}
    if k.scheduler_name:
        pod["schedulerName"] = k.scheduler_name
    if k.priority_class:
        pod["priorityClassName"] = k.priority_class
    pod.update(kubernetes_pod.placement(spec))
    pod["containers"] = [_container(spec)]
    pod["volumes"] = kubernetes_pod.volumes(spec)
    return {"metadata": meta, "spec": pod}


def _run_policy(spec: JobSpec) -> dict[str, Any]:
    k = spec.kubernetes
    rp: dict[str, Any] = {
        "cleanPodPolicy": k.clean_pod_policy,
        "ttlSecondsAfterFinished": k.ttl_seconds_after_finished,
        "backoffLimit": k.backoff_limit,
    }
    if k.active_deadline_seconds:
        rp["activeDeadlineSeconds"] = k.active_deadline_seconds
    if k.kueue_queue:
        rp["suspend"] = True  # Kueue admits (unsuspends) the job when its quota allows
    sched: dict[str, Any] = {}
    if k.gang:
        sched["minAvailable"] = spec.min_nodes if spec.elastic else spec.nodes
    if k.queue:
        sched["queue"] = k.queue
    if k.priority_class:
        sched["priorityClass"] = k.priority_class
    if sched:
        rp["schedulingPolicy"] = sched
    return rp


def render(spec: JobSpec) -> dict[str, Any]:
    """The PyTorchJob as a plain dict."""
    SUPPORT.check(spec)
    template = _pod_template(spec)
    replica = {"restartPolicy": spec.restart_policy, "template": template}
    body: dict[str, Any] = {"nprocPerNode": str(spec.procs_per_node), "runPolicy": _run_policy(spec)}
    if spec.elastic:
        policy: dict[str, Any] = {"minReplicas": spec.min_nodes, "maxReplicas": spec.nodes, "rdzvBackend": "c10d",
                                  "rdzvId": spec.name}
        if spec.max_restarts:
            policy["maxRestarts"] = spec.max_restarts
        body["elasticPolicy"] = policy
        body["pytorchReplicaSpecs"] = {"Worker": {"replicas": spec.nodes, **replica}}
    else:
        replicas: dict[str, Any] = {"Master": {"replicas": 1, **replica}}
        if spec.nodes > 1:
            replicas["Worker"] = {"replicas": spec.nodes - 1, **replica}
        body["pytorchReplicaSpecs"] = replicas
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": kubernetes_pod.metadata(spec), "spec": body}


def render_text(spec: JobSpec) -> dict[str, str]:
    return {"pytorchjob.yaml": to_yaml(render(spec))}
