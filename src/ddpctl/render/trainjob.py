"""Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``) renderer, pinned to Trainer v2.3.0.

Uses the ``torch-distributed`` ClusterTrainingRuntime (``kubernetes.runtime``): ``trainer.numNodes``,
``numProcPerNode`` (an int32 since v2.2), ``resourcesPerNode``, image, command and env. The torch plugin injects
``PET_NNODES``/``PET_NPROC_PER_NODE``/``PET_NODE_RANK``/``PET_MASTER_ADDR``/``PET_MASTER_PORT`` (port fixed at
29500), so the command is ``torchrun --no-python CMD`` with no topology flags and the env never carries a
``PET_*`` variable (the webhook rejects it). ``/dev/shm``, node selectors, tolerations, the service account and
the Istio annotation go through ``runtimePatches`` on the ``node`` replicated job.

Not honoured (fails before rendering): host networking (the v2.3.0 pod patch has no hostNetwork), a port other
than 29500, per-replica restart policies, runPolicy settings and gang-scheduling options (these belong to the
runtime's podGroupPolicy), plus the features no Kubernetes target has (hosts, device_ids, workdir, ...).
"""

from __future__ import annotations

from typing import Any

from ddpctl import launch
from ddpctl.render import kubernetes_pod, to_yaml
from ddpctl.spec import JobSpec, KubernetesOptions
from ddpctl.targets import Support, Unsupported

TARGET = "trainjob"
API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND = "TrainJob"
TRAINER_VERSION = "v2.3.0"
NODE_JOB = "node"  # the replicatedJob and container name in the torch-distributed runtime
PATCH_MANAGER = "ddpctl.io/render"
PET_VARS = launch.PET_VARS

_D = KubernetesOptions()

SUPPORT = Support(TARGET, sections=kubernetes_pod.SECTIONS, honours=kubernetes_pod.COMMON_HONOURS | {"kubernetes.runtime"},
                  unsupported=kubernetes_pod.COMMON_UNSUPPORTED + (
    Unsupported("network: host", lambda s: s.network == "host",
                "TrainJob v2.3.0 runtimePatches have no hostNetwork", "use network: bridge, or render a pytorchjob",
                fields=("network",)),
    Unsupported("port", lambda s: s.port != launch.TRAINJOB_MASTER_PORT,
                f"the torch plugin fixes the master port at {launch.TRAINJOB_MASTER_PORT}",
                f"drop port (or set {launch.TRAINJOB_MASTER_PORT}), or render a pytorchjob"),
    Unsupported("PET_* env", lambda s: any(k in PET_VARS for k in s.env_dict),
                "the TrainJob webhook rejects PET_* variables in trainer.env", "remove them from env", fields=()),
    Unsupported("nodes MIN:MAX", lambda s: s.min_nodes is not None,
                "a TrainJob's numNodes is fixed: Trainer v2.3 has no elastic policy (its JobSet restarts the "
                "whole job)", "give a fixed node count, or render a pytorchjob (elasticPolicy)", fields=("min_nodes",)),
    Unsupported("kubernetes.restart_policy", lambda s: s.kubernetes.restart_policy != _D.restart_policy,
                "restarts are set by the runtime's JobSet", "drop it, or render a pytorchjob"),
    Unsupported("kubernetes.clean_pod_policy", lambda s: s.kubernetes.clean_pod_policy != _D.clean_pod_policy,
                "TrainJob has no runPolicy", "drop it, or render a pytorchjob"),
    Unsupported("kubernetes.ttl_seconds_after_finished",
                lambda s: s.kubernetes.ttl_seconds_after_finished != _D.ttl_seconds_after_finished,
                "TrainJob has no runPolicy", "drop it, or render a pytorchjob"),
    Unsupported("kubernetes.backoff_limit", lambda s: s.kubernetes.backoff_limit != _D.backoff_limit,
                "TrainJob has no runPolicy", "drop it, or render a pytorchjob"),
    Unsupported("gang scheduling options",
                lambda s: s.kubernetes.gang or bool(s.kubernetes.scheduler_name or s.kubernetes.queue
                                                    or s.kubernetes.priority_class),
                "gang scheduling is the runtime's podGroupPolicy",
                "configure podGroupPolicy in the ClusterTrainingRuntime and drop these options",
                fields=("kubernetes.gang", "kubernetes.scheduler_name", "kubernetes.queue", "kubernetes.priority_class")),
))


def _pod_patch(spec: JobSpec) -> dict[str, Any]:
    fix = "mount a parent directory once instead of many, or render a pytorchjob"
    container: dict[str, Any] = {"name": NODE_JOB, "volumeMounts": _within_crd(
        "volume mounts (volumes and /dev/shm)", kubernetes_pod.volume_mounts(spec), fix)}
    sc = kubernetes_pod.security_context(spec)
    if sc:
        container["securityContext"] = sc
    pod: dict[str, Any] = {}
    pod.update(kubernetes_pod.placement(spec))
    pod["volumes"] = _within_crd("volumes (volumes and /dev/shm)", kubernetes_pod.volumes(spec), fix)
    _within_crd("tolerations", pod.get("tolerations", []), "merge tolerations (operator Exists covers many)")
    pod["containers"] = [container]
    template: dict[str, Any] = {}
    annotations = kubernetes_pod.pod_annotations(spec)
    if annotations:
        template["metadata"] = {"annotations": annotations}
    template["spec"] = pod
    return template


# The TrainJob CRD's maxItems (v2.3.0 schema): a longer list is rejected by the API server at apply time.
CRD_MAX_ITEMS = 128


def _within_crd(what: str, items: list, hint: str) -> list:
    if len(items) > CRD_MAX_ITEMS:
        from ddpctl.errors import SpecError

        raise SpecError(f"the TrainJob would have {len(items)} {what}, more than the {CRD_MAX_ITEMS} its CRD allows",
                        hint)
    return items


def render(spec: JobSpec) -> dict[str, Any]:
    """The TrainJob as a plain dict."""
    SUPPORT.check(spec)
    trainer: dict[str, Any] = {
        "image": spec.resolved_image,
        "command": _within_crd("command words", kubernetes_pod.command(spec), "pass long argument lists in a file"),
        "env": _within_crd("env entries (env, secret_env and ddpctl's own)", kubernetes_pod.env_list(spec),
                           "pass large configuration as a file in a volume, or render a pytorchjob"),
        "numNodes": spec.nodes,
        "numProcPerNode": spec.procs_per_node,
    }
    res = kubernetes_pod.resources(spec)
    if res:
        trainer["resourcesPerNode"] = res
    body: dict[str, Any] = {
        "runtimeRef": {"name": spec.kubernetes.runtime, "apiGroup": "trainer.kubeflow.org",
                       "kind": "ClusterTrainingRuntime"},
        "trainer": trainer,
        "runtimePatches": [{
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                "name": NODE_JOB,
                "template": {"spec": {"template": _pod_patch(spec)}},
            }]}}},
        }],
    }
    if spec.kubernetes.kueue_queue:
        body["suspend"] = True
    if spec.kubernetes.active_deadline_seconds:
        body["activeDeadlineSeconds"] = spec.kubernetes.active_deadline_seconds
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": kubernetes_pod.metadata(spec), "spec": body}


def render_text(spec: JobSpec) -> dict[str, str]:
    return {"trainjob.yaml": to_yaml(render(spec))}
