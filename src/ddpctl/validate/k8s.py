"""Kubernetes rules for PyTorchJob and TrainJob manifests, beyond the CRD's openAPIV3Schema.

What the API server and the operators' webhooks check on *create* that a schema cannot say:

- **ObjectMeta** (the CRDs declare ``metadata`` as a bare object): known fields only; ``name`` a DNS-1035 label
  of at most 63 characters (both webhooks; TrainJob also by CEL), ``namespace`` a DNS-1123 label, label keys
  qualified names and values label values, annotation keys qualified names, at most 256 KiB of annotations.
- **Pod templates** (core v1 validation, the subset a hand edit breaks): container names DNS-1123 labels and
  unique; env names; ``value`` xor ``valueFrom`` with one source; ``secretKeyRef``/``configMapKeyRef`` names and
  keys; resource names, quantities, requests <= limits, whole-number extended resources (``nvidia.com/gpu``)
  with requests = limits; port numbers and names; volume names unique and every ``volumeMount`` naming a volume
  (complete pods only: a TrainJob ``runtimePatch`` is merged into the runtime's pod); unique mount paths;
  ``..`` in a hostPath or mount path; tolerations (operator, effect, seconds only with NoExecute); node selector
  labels; service account, scheduler and priority class names; DNS policy.
- **Webhooks**: Training Operator v1.9.4 ``pytorchjob_webhook.go`` (L75-160): replica types Master/Worker,
  Master replicas exactly 1, a container named ``pytorch`` with an image in every replica, Worker replicas >= 1,
  elasticPolicy needs a Worker, restartPolicy and cleanPodPolicy values; Trainer v2.3.0 ``torch.go`` (L65-77): no ``PET_*`` in ``trainer.env``.
- **CEL rules** (``x-kubernetes-validations``) in the bundled CRDs that apply on create are evaluated here, by
  their exact text (:data:`CEL_RULES`); ``self == oldSelf`` (immutability) applies only to updates.

The webhooks and CEL rules are here; the value rules and ObjectMeta are in :mod:`ddpctl.validate.meta`, the pod
template rules in :mod:`ddpctl.validate.pods`.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from ddpctl.launch import PET_VARS  # one copy of the torch plugin's variables
from ddpctl.validate.meta import dns1035_label, dns1123_subdomain, object_meta, parse_quantity
from ddpctl.validate.pods import as_dict, as_list, env_issues, pod_template, resources_issues
from ddpctl.validate.schema import Issue, Path, short

__all__ = ["CEL_RULES", "cel_issues", "object_meta", "parse_quantity", "plain_scalar_issues", "pod_template",
           "pytorchjob", "trainjob"]


def plain_scalar_issues(found: list[tuple[Path, str, str]], schema: dict) -> Iterator[Issue]:
    """Values written plain that kubectl (go-yaml v2) reads as no string (``y``, ``1e-3``; ``found``: the
    loader's ``plain_non_strings``) where the CRD's schema wants a string: a command word, an arg, an env value,
    a label value in a pod template... The API server would reject them (or get other text)."""
    for path, text, what in found:
        sub: Any = schema
        for part in path:
            if not isinstance(sub, dict):
                break
            sub = sub.get("items") if isinstance(part, int) else \
                (sub.get("properties") or {}).get(part, sub.get("additionalProperties"))
        if isinstance(sub, dict) and sub.get("type") == "string":
            yield Issue(path, f"{short(text)} is written without quotes, which kubectl reads as {what}, not a "
                              "string; quote it")

# -------------------------------------------------------------------------------------- webhooks


def pytorchjob(doc: dict) -> Iterator[Issue]:
    """Training Operator v1.9.4 webhook (pytorchjob_webhook.go L75-160) and pod rules."""
    yield from object_meta(doc.get("metadata"), ("metadata",), top=True, name_rule=dns1035_label)
    spec = as_dict(doc.get("spec"))
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        yield Issue(("spec", "pytorchReplicaSpecs"), "must list the Master (and Worker) replicas")
        return
    for rtype, rspec in replicas.items():
        p = ("spec", "pytorchReplicaSpecs", rtype)
        if rtype not in ("Master", "Worker"):
            yield Issue(p, f"replica type {rtype!r} is not Master or Worker")
        rspec = as_dict(rspec)
        template = as_dict(rspec.get("template"))
        containers = as_list(as_dict(template.get("spec")).get("containers"))
        if not any(as_dict(c).get("name") == "pytorch" for c in containers):
            yield Issue(p + ("template", "spec", "containers"), "needs a container named 'pytorch'")
        yield from pod_template(template, p + ("template",), complete=True)
    master = as_dict(replicas.get("Master"))
    if "Master" in replicas and master.get("replicas") != 1:
        yield Issue(("spec", "pytorchReplicaSpecs", "Master", "replicas"),
                    f"must be set to exactly 1, got {short(master.get('replicas'))}")
    worker = as_dict(replicas.get("Worker"))
    n = worker.get("replicas", 1)
    if "Worker" in replicas and isinstance(n, int) and n < 1:
        yield Issue(("spec", "pytorchReplicaSpecs", "Worker", "replicas"), f"must be at least 1, got {n}")
    if "elasticPolicy" in spec and "Worker" not in replicas:
        yield Issue(("spec", "elasticPolicy"), "needs a Worker replica spec")
    for rtype, rspec in replicas.items():
        policy = as_dict(rspec).get("restartPolicy")
        if policy not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            yield Issue(("spec", "pytorchReplicaSpecs", rtype, "restartPolicy"),
                        f"must be one of Always, OnFailure, Never, ExitCode; got {short(policy)}")
    pclass = as_dict(as_dict(spec.get("runPolicy")).get("schedulingPolicy")).get("priorityClass")
    if isinstance(pclass, str) and pclass and dns1123_subdomain(pclass):
        yield Issue(("spec", "runPolicy", "schedulingPolicy", "priorityClass"), dns1123_subdomain(pclass) or "")
    clean = as_dict(spec.get("runPolicy")).get("cleanPodPolicy")
    if clean not in (None, "All", "Running", "None"):
        yield Issue(("spec", "runPolicy", "cleanPodPolicy"), f"must be one of All, Running, None; got {short(clean)}")


def trainjob(doc: dict) -> Iterator[Issue]:
    """Trainer v2.3.0: webhook (torch.go L65-77), CEL on metadata.name, and the patched pods."""
    yield from object_meta(doc.get("metadata"), ("metadata",), top=True, name_rule=dns1035_label)
    spec = as_dict(doc.get("spec"))
    trainer = as_dict(spec.get("trainer"))
    for i, item in enumerate(as_list(trainer.get("env"))):
        if as_dict(item).get("name") in PET_VARS:
            yield Issue(("spec", "trainer", "env", i, "name"),
                        f"{item['name']} is set by the torch plugin; the webhook rejects it in trainer.env")
    yield from env_issues(trainer.get("env"), ("spec", "trainer", "env"))
    yield from resources_issues(trainer.get("resourcesPerNode"), ("spec", "trainer", "resourcesPerNode"))
    runtime = as_dict(spec.get("runtimeRef")).get("name")
    if isinstance(runtime, str) and runtime and dns1123_subdomain(runtime):
        yield Issue(("spec", "runtimeRef", "name"), dns1123_subdomain(runtime) or "")
    image = trainer.get("image")
    if isinstance(image, str) and image != image.strip():
        yield Issue(("spec", "trainer", "image"), "must not have leading or trailing whitespace")
    for i, patch in enumerate(as_list(spec.get("runtimePatches"))):
        jobs = as_list(as_dict(as_dict(as_dict(as_dict(patch).get("trainingRuntimeSpec")).get("template")).get("spec"))
                     .get("replicatedJobs"))
        for j, rj in enumerate(jobs):
            template = as_dict(as_dict(as_dict(rj).get("template")).get("spec")).get("template")
            p = ("spec", "runtimePatches", i, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", j,
                 "template", "spec", "template")
            yield from pod_template(template, p, complete=False)


# CEL rules of the bundled CRDs, by their exact text. Update-only rules map to None. A unit test fails when a
# CRD carries a rule that is in neither group, so an updated CRD cannot silently lose a check.
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
CEL_RULES: dict[str, Callable[[Any], bool] | None] = {
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')":
        lambda s: re.fullmatch("[a-z]([-a-z0-9]*[a-z0-9])?", str(as_dict(as_dict(s).get("metadata")).get("name", "")))
        is not None,  # the CEL rule's own regex, as written in the CRD
    "size(self.metadata.name) <= 63": lambda s: len(str(as_dict(as_dict(s).get("metadata")).get("name", ""))) <= 63,
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')":
        lambda s: not isinstance(s, str) or s == "" or _URI.match(s) is not None,
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']":
        lambda s: s in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"),
    "has(self.lastUpdatedTime)": lambda s: "lastUpdatedTime" in as_dict(s),
    "self == oldSelf": None,
}


def cel_issues(doc: Any, schema: dict, path: Path = ()) -> Iterator[Issue]:
    """Evaluate the create-time CEL rules (:data:`CEL_RULES`) where the document has a value."""
    for rule in schema.get("x-kubernetes-validations", ()):
        check = CEL_RULES.get(rule.get("rule"))
        if check is not None and not check(doc):
            yield Issue(path, rule.get("message") or f"fails {rule['rule']}")
    if isinstance(doc, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, value in doc.items():
            if key in props:
                yield from cel_issues(value, props[key], path + (key,))
            elif isinstance(extra, dict):
                yield from cel_issues(value, extra, path + (key,))
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(doc):
            yield from cel_issues(item, schema["items"], path + (i,))
