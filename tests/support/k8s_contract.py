"""A pure emulation of what the Kubeflow operators do to the pods of a rendered job (test-only; imported as
a plain module with tests/support on sys.path).

No Kubernetes API is reachable from ddpctl's tests, so this module reproduces the *contract* of the two
operators, from their source (see docs/render.md for the line-by-line notes):

- **PyTorchJob, Training Operator v1.9.4** (kubeflow/trainer tag v1.9.4, commit 4445c12a):
  pod/Service names ``<job>-<replica type>-<index>`` (``pkg/core/utils.go`` L30-33); env appended to every
  container after the user's (``pkg/controller.v1/pytorch/envvar.go`` L43-127): ``PYTHONUNBUFFERED=1``; when a
  Master exists ``MASTER_ADDR``/``PET_MASTER_ADDR=<job>-master-0`` (``master.go`` L33-62),
  ``MASTER_PORT``/``PET_MASTER_PORT`` = the Master ``pytorch`` container's ``pytorchjob-port`` (default 23456,
  ``envvar.go`` L155-168), ``WORLD_SIZE`` = total replicas x int(nprocPerNode) (non-integers count as 1),
  ``RANK``/``PET_NODE_RANK`` = the pod index (Master 0, Worker i -> i+1); ``PET_NPROC_PER_NODE`` = nprocPerNode
  (defaulted to ``auto``); ``PET_NNODES`` = total replicas (no elasticPolicy).
- **TrainJob, Kubeflow Trainer v2.3.0** (tag v2.3.0, commit 658725bd; ``pkg/runtime/framework/plugins/torch/
  torch.go`` L110-225): JobSet pods ``<job>-node-0-<i>`` with subdomain ``<job>``; only the trainer container
  ``node`` gets ``PET_NNODES``, ``PET_NPROC_PER_NODE`` (``auto`` becomes the CPU count without GPUs),
  ``PET_NODE_RANK`` (the job completion index), ``PET_MASTER_ADDR=<job>-node-0-0.<job>``,
  ``PET_MASTER_PORT=29500``; ``PET_*`` in ``trainer.env`` is rejected by the webhook (torch.go L65-77).

- **PyTorchJob elasticPolicy** (``pkg/controller.v1/pytorch/elastic.go``): ``PET_RDZV_ENDPOINT`` =
  ``<rdzvHost or <job>-worker-0>:<rdzvPort or the Worker's pytorchjob-port>``, ``PET_RDZV_BACKEND`` (default
  c10d), ``PET_NNODES`` = ``min:max``, ``PET_MAX_RESTARTS``, ``PET_RDZV_ID`` (when set); no ``PET_NNODES`` of
  the replica count then.
- **Restarts** (``pkg/core/pod.go`` L80-88, ``pkg/util/train/train_util.go`` L24-26, ``common/pod.go``
  L339-374): :func:`after_exit` says what the operator does when a pod's ``pytorch`` container exits:
  ``ExitCode`` recreates the pod for a code >= 128 and fails the job for 1-127; ``OnFailure`` restarts it for
  any non-zero code; ``Never`` fails the job.

Then the kubelet expands ``$(VAR)`` references in env values, command and args (``$$`` is a literal ``$``),
which :func:`expand` reproduces. Not emulated: init containers, CEL rules, scheduling, HPA metrics.

The results are plain dataclasses so that a test harness can start each pod as a real container (hostname,
network aliases, env, argv, image, /dev/shm size, GPUs, host mounts) and check the job end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# the torch plugin's variables and its fixed master port: one copy, shared with the trainjob renderer and the
# validator (the port is the Trainer v2 torch plugin's figure; ddpctl.launch states it once)
from ddpctl.launch import PET_VARS, TRAINJOB_MASTER_PORT

PYTORCHJOB_DEFAULT_PORT = 23456
TRAINJOB_DEFAULT_IMAGE = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"  # runtime torch-distributed
GPU_RESOURCE = "nvidia.com/gpu"


class ContractError(ValueError):
    """The job would be rejected by the operator's webhook (or cannot be emulated)."""


@dataclass(frozen=True)
class Mount:
    source: str  # hostPath on the Kubernetes node
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class Pod:
    """One pod of a job, as the training container would see it."""

    name: str
    hostname: str
    aliases: tuple[str, ...]  # DNS names that resolve to this pod (Service name, hostname.subdomain)
    replica_type: str  # master | worker | node
    index: int  # pod (node) index across the job
    image: str
    argv: tuple[str, ...]  # command + args after kubelet expansion
    env: dict[str, str]  # final env of the training container after injection and expansion
    shm_size: int | None  # bytes of the memory-backed /dev/shm emptyDir, None without one
    gpus: int
    mounts: tuple[Mount, ...] = ()
    host_network: bool = False


# --------------------------------------------------------------------------------- kubelet behaviour

def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity ('16Gi', '500m', 2) as a number (the validator's parser, one copy)."""
    from ddpctl.validate.k8s import parse_quantity as exact

    number = exact(value)
    if number is None:
        raise ContractError(f"{value!r} is not a Kubernetes quantity")
    return float(number)


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined names are replaced, ``$$`` is ``$``, the rest is kept."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "$" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def _container_env(env_list: list[Mapping[str, Any]], extra: Mapping[str, str] | None = None,
                   secrets: Mapping[tuple[str, str], str] | None = None) -> dict[str, str]:
    """Env entries in order, each value expanded against the ones before it (later duplicates win).

    ``valueFrom.secretKeyRef`` reads ``secrets[(secret name, key)]``, standing in for the Secret objects of the
    namespace (the kubelet fails the pod when the Secret or key is missing; so does this)."""
    env: dict[str, str] = {}
    for item in env_list:
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref is not None:
            where = (ref.get("name"), ref.get("key"))
            if secrets is None or where not in secrets:
                raise ContractError(f"env {item.get('name')!r} reads Secret {where[0]!r} key {where[1]!r}, "
                                    "which does not exist")
            env[item["name"]] = secrets[where]  # a Secret's value is not expanded
            continue
        if "value" not in item:
            raise ContractError(f"env {item.get('name')!r} has no literal value (only secretKeyRef is emulated)")
        env[item["name"]] = expand(str(item["value"]), env)
    for k, v in (extra or {}).items():
        env[k] = v
    return env


def _mounts(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> tuple[int | None, tuple[Mount, ...]]:
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    shm: int | None = None
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts", []):
        vol = volumes.get(vm["name"])
        if vol is None:
            raise ContractError(f"volumeMount {vm['name']!r} names no volume")
        if vm["mountPath"] == "/dev/shm" and "emptyDir" in vol:
            limit = vol["emptyDir"].get("sizeLimit")
            shm = int(parse_quantity(limit)) if limit is not None else None
        elif "hostPath" in vol:
            mounts.append(Mount(vol["hostPath"]["path"], vm["mountPath"], bool(vm.get("readOnly", False))))
    return shm, tuple(mounts)


def _gpus(resources: Mapping[str, Any] | None) -> int:
    res = resources or {}
    for part in ("limits", "requests"):
        if GPU_RESOURCE in (res.get(part) or {}):
            return int(parse_quantity(res[part][GPU_RESOURCE]))
    return 0


# ------------------------------------------------------------------------------------------- PyTorchJob


def pytorchjob_pods(job: Mapping[str, Any], secrets: Mapping[tuple[str, str], str] | None = None) -> list[Pod]:
    """The pods the Training Operator v1.9.4 creates for a rendered PyTorchJob, Master first."""
    name = job["metadata"]["name"]
    spec = job["spec"]
    replicas: Mapping[str, Any] = spec["pytorchReplicaSpecs"]
    elastic = spec.get("elasticPolicy")
    if elastic is not None and "Worker" not in replicas:
        raise ContractError("elasticPolicy needs a Worker replica spec")
    for rtype in replicas:
        if rtype not in ("Master", "Worker"):
            raise ContractError(f"replica type {rtype!r} is not Master or Worker")
    if "Master" in replicas and replicas["Master"].get("replicas") != 1:
        raise ContractError("Master.replicas must be exactly 1")
    nproc = str(spec.get("nprocPerNode", "auto"))
    counts = {rtype: int(r.get("replicas", 1)) for rtype, r in replicas.items()}
    total = sum(counts.values())
    world = total * (int(nproc) if nproc.isdigit() else 1)

    def pytorch_container(rspec: Mapping[str, Any]) -> Mapping[str, Any]:
        for c in rspec["template"]["spec"]["containers"]:
            if c["name"] == "pytorch":
                return c
        raise ContractError("a replica has no container named 'pytorch'")

    master_port = PYTORCHJOB_DEFAULT_PORT
    if "Master" in replicas:
        for p in pytorch_container(replicas["Master"]).get("ports", []):
            if p.get("name") == "pytorchjob-port":
                master_port = int(p["containerPort"])

    pods: list[Pod] = []
    for rtype in ("Master", "Worker"):
        if rtype not in replicas:
            continue
        rspec = replicas[rtype]
        pod_spec = rspec["template"]["spec"]
        c = pytorch_container(rspec)
        for index in range(counts[rtype]):
            pod_name = f"{name}-{rtype.lower()}-{index}"
            injected = {"PYTHONUNBUFFERED": "1"}
            if "Master" in replicas:
                rank = index if rtype == "Master" else index + 1
                injected.update({
                    "MASTER_ADDR": f"{name}-master-0", "PET_MASTER_ADDR": f"{name}-master-0",
                    "MASTER_PORT": str(master_port), "PET_MASTER_PORT": str(master_port),
                    "WORLD_SIZE": str(world), "RANK": str(rank), "PET_NODE_RANK": str(rank),
                })
            injected["PET_NPROC_PER_NODE"] = nproc
            if elastic is None:
                injected["PET_NNODES"] = str(total)
            else:
                injected.update(_elastic_env(name, elastic, replicas, pytorch_container))
            env = _container_env(c.get("env", []), injected, secrets)
            argv = tuple(expand(w, env) for w in list(c.get("command", [])) + list(c.get("args", [])))
            shm, mounts = _mounts(pod_spec, c)
            node_index = (index if rtype == "Master" else index + counts.get("Master", 0))
            pods.append(Pod(name=pod_name, hostname=pod_name, aliases=(pod_name,), replica_type=rtype.lower(),
                            index=node_index, image=c["image"], argv=argv, env=env, shm_size=shm,
                            gpus=_gpus(c.get("resources")), mounts=mounts,
                            host_network=bool(pod_spec.get("hostNetwork", False))))
    return pods


def _elastic_env(name: str, policy: Mapping[str, Any], replicas: Mapping[str, Any], pytorch_container) -> dict:
    port = PYTORCHJOB_DEFAULT_PORT
    for p in pytorch_container(replicas["Worker"]).get("ports", []):
        if p.get("name") == "pytorchjob-port":
            port = int(p["containerPort"])
    env = {"PET_RDZV_ENDPOINT": f"{policy.get('rdzvHost') or name + '-worker-0'}:{policy.get('rdzvPort') or port}",
           "PET_RDZV_BACKEND": policy.get("rdzvBackend") or "c10d"}
    if policy.get("minReplicas") is None and policy.get("maxReplicas") is None:
        env["PET_NNODES"] = str(replicas["Worker"].get("replicas", 1))
    else:
        env["PET_NNODES"] = f"{policy.get('minReplicas')}:{policy.get('maxReplicas')}"
    if policy.get("maxRestarts") is not None:
        env["PET_MAX_RESTARTS"] = str(policy["maxRestarts"])
    if policy.get("rdzvId") is not None:
        env["PET_RDZV_ID"] = str(policy["rdzvId"])
    return env


def after_exit(job: Mapping[str, Any], pod: Pod, exit_code: int) -> str:
    """What the Training Operator v1.9.4 does when ``pod``'s ``pytorch`` container exits with ``exit_code``:
    ``"succeeded"``, ``"recreate"`` (ExitCode: the pod is deleted and created again, same name and env),
    ``"restart"`` (OnFailure: the kubelet restarts the container in place) or ``"failed"`` (the job fails)."""
    if exit_code == 0:
        return "succeeded"
    rspec = job["spec"]["pytorchReplicaSpecs"][pod.replica_type.capitalize()]
    policy = rspec.get("restartPolicy", "OnFailure")
    if policy == "ExitCode":
        return "recreate" if exit_code >= 128 else "failed"
    if policy in ("OnFailure", "Always"):
        return "restart"
    return "failed"


# --------------------------------------------------------------------------------------------- TrainJob


def trainjob_pods(job: Mapping[str, Any], secrets: Mapping[tuple[str, str], str] | None = None) -> list[Pod]:
    """The pods Kubeflow Trainer v2.3.0 (torch-distributed runtime) creates for a rendered TrainJob."""
    name = job["metadata"]["name"]
    spec = job["spec"]
    trainer = spec.get("trainer", {})
    for item in trainer.get("env", []):
        if item["name"] in PET_VARS:
            raise ContractError(f"trainer.env must not set {item['name']} (the webhook rejects it)")
    nodes = int(trainer.get("numNodes", 1))
    resources = trainer.get("resourcesPerNode") or {}
    gpus = _gpus(resources)
    nproc = trainer.get("numProcPerNode", "auto")
    if str(nproc) == "auto" and not gpus:
        cpu = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
        nproc = max(1, int(parse_quantity(cpu))) if cpu is not None else "auto"
    pod_spec: Mapping[str, Any] = {}
    container: Mapping[str, Any] = {}
    for patch in spec.get("runtimePatches", []):
        for rj in patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
            if rj["name"] == "node":
                pod_spec = rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
                container = next((c for c in pod_spec.get("containers", []) if c["name"] == "node"), {})
    shm, mounts = _mounts(pod_spec, container)
    master = f"{name}-node-0-0.{name}"
    pods = []
    for i in range(nodes):
        injected = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc), "PET_NODE_RANK": str(i),
                    "PET_MASTER_ADDR": master, "PET_MASTER_PORT": str(TRAINJOB_MASTER_PORT)}
        env = _container_env(trainer.get("env", []), injected, secrets)
        argv = tuple(expand(w, env) for w in list(trainer.get("command", [])) + list(trainer.get("args", [])))
        hostname = f"{name}-node-0-{i}"
        pods.append(Pod(name=hostname, hostname=hostname, aliases=(hostname, f"{hostname}.{name}"),
                        replica_type="node", index=i, image=trainer.get("image", TRAINJOB_DEFAULT_IMAGE),
                        argv=argv, env=env, shm_size=shm, gpus=gpus, mounts=mounts))
    return pods


def pods_for(job: Mapping[str, Any], secrets: Mapping[tuple[str, str], str] | None = None) -> list[Pod]:
    """Dispatch on ``kind``. ``secrets``: (Secret name, key) -> value, the namespace's Secrets."""
    kind = job.get("kind")
    if kind == "PyTorchJob":
        return pytorchjob_pods(job, secrets)
    if kind == "TrainJob":
        return trainjob_pods(job, secrets)
    raise ContractError(f"kind {kind!r} is not PyTorchJob or TrainJob")
