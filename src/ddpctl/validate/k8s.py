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
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterator

from ddpctl import rules
from ddpctl.validate.schema import Issue, Path, json_type, short

# ------------------------------------------------------------------------------------ value rules
# The value rules are ddpctl.rules' (one copy for the spec layer and the validator), turned into messages.

# Kubernetes' own env-name rule (IsEnvVarName, Kubernetes <= 1.33) accepts '-' and '.', which the spec rule
# (rules.env_name, POSIX names, safe in a shell script) does not: a hand-written manifest may use them.
ENV_NAME_K8S = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DEC = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3),
        "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
        "E": Decimal(10**18)}


def _message(rule: Callable[..., Any]) -> Callable[[Any], str | None]:
    """A ``rules`` function as 'None when valid, else the problem'."""
    def check(value: Any) -> str | None:
        try:
            rule(value)
        except rules.RuleError as exc:
            return exc.problem
        return None

    return check


dns1123_label = _message(rules.dns1123_label)
dns1123_subdomain = _message(rules.dns1123_subdomain)
dns1035_label = _message(rules.dns1035_label)
qualified_name = _message(rules.label_key)
label_value = _message(rules.label_value)


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity (``16Gi``, ``500m``, ``1e3``, 2) as a Decimal, or None if it is not one
    (the syntax is :func:`ddpctl.rules.k8s_quantity`)."""
    if isinstance(value, float) and math.isfinite(value):
        return Decimal(repr(value))
    try:
        text = rules.k8s_quantity(value)
    except rules.RuleError:
        return None
    try:
        if text[-2:] in _BIN:
            return Decimal(text[:-2]) * _BIN[text[-2:]]
        if text[-1] in _DEC:
            return Decimal(text[:-1]) * _DEC[text[-1]]
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - excluded by the syntax rule
        return None


# ------------------------------------------------------------------------------------ ObjectMeta

OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "labels", "annotations", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers",
    "managedFields", "selfLink",
})
MAX_ANNOTATIONS_BYTES = 256 * 1024


def _string_map(value: Any, path: Path, key_rule: Callable[[str], str | None],
                value_rule: Callable[[str], str | None] | None) -> Iterator[Issue]:
    if not isinstance(value, dict):
        if value is not None:
            yield Issue(path, f"must be a mapping, got {json_type(value)}")
        return
    for k, v in value.items():
        problem = key_rule(k)
        if problem:
            yield Issue(path + (k,), f"key {problem}")
        if not isinstance(v, str):
            yield Issue(path + (k,), f"must be a string, got {json_type(v)} {short(v)} (quote it)")
        elif value_rule is not None:
            problem = value_rule(v)
            if problem:
                yield Issue(path + (k,), problem)


def object_meta(meta: Any, path: Path, *, top: bool, name_rule: Callable[[str], str | None] | None = None,
                ) -> Iterator[Issue]:
    if not isinstance(meta, dict):
        if top or meta is not None:
            yield Issue(path, f"must be a mapping, got {json_type(meta)}")
        return
    for key in meta:
        if key not in OBJECT_META_FIELDS:
            yield Issue(path + (key,), "is not a known field of ObjectMeta")
    name = meta.get("name")
    if top and not name and not meta.get("generateName"):
        yield Issue(path + ("name",), "is required")
    for key in ("name", "generateName", "namespace"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            yield Issue(path + (key,), f"must be a string, got {json_type(meta[key])}")
    if isinstance(name, str) and name and top:
        problem = (name_rule or dns1123_subdomain)(name)
        if problem:
            yield Issue(path + ("name",), problem)
    ns = meta.get("namespace")
    if isinstance(ns, str) and top:
        problem = dns1123_label(ns)
        if problem:
            yield Issue(path + ("namespace",), problem)
    yield from _string_map(meta.get("labels"), path + ("labels",), qualified_name, label_value)
    annotations = meta.get("annotations")
    yield from _string_map(annotations, path + ("annotations",), qualified_name, None)
    if isinstance(annotations, dict):
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS_BYTES:
            yield Issue(path + ("annotations",), f"total size {size} exceeds {MAX_ANNOTATIONS_BYTES} bytes")


# ------------------------------------------------------------------------------------- pod spec

DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _backsteps(p: str) -> bool:
    return ".." in p.replace("\\", "/").split("/")


def _env(env: Any, path: Path) -> Iterator[Issue]:
    for i, item in enumerate(_list(env)):
        if not isinstance(item, dict):
            continue
        p = path + (i,)
        name = item.get("name")
        if isinstance(name, str) and not ENV_NAME_K8S.match(name):
            yield Issue(p + ("name",), f"{name!r} is not a valid environment variable name "
                                       "(letters, digits, '_', '-', '.', not starting with a digit)")
        has_value = item.get("value") not in (None, "")
        source = item.get("valueFrom")
        if source is not None:
            if has_value:
                yield Issue(p, "may not have both value and valueFrom")
            kinds = [k for k in _dict(source) if _dict(source).get(k) is not None]
            if len(kinds) != 1:
                yield Issue(p + ("valueFrom",), f"must have exactly one source, has {len(kinds)}")
            for kind in ("secretKeyRef", "configMapKeyRef"):
                ref = _dict(_dict(source).get(kind))
                if kind in _dict(source):
                    rname, rkey = ref.get("name"), ref.get("key")
                    if not isinstance(rname, str) or not rname:
                        yield Issue(p + ("valueFrom", kind, "name"), "is required (the Secret/ConfigMap name)")
                    elif dns1123_subdomain(rname):
                        yield Issue(p + ("valueFrom", kind, "name"), dns1123_subdomain(rname) or "")
                    if isinstance(rkey, str) and (len(rkey) > 253 or not CONFIG_KEY.match(rkey)):
                        yield Issue(p + ("valueFrom", kind, "key"),
                                    f"{rkey!r} is not a valid key (letters, digits, '-', '_' or '.')")


def _resources(res: Any, path: Path) -> Iterator[Issue]:
    res = _dict(res)
    parsed: dict[str, dict[str, Decimal]] = {}
    for part in ("limits", "requests"):
        for name, qty in _dict(res.get(part)).items():
            p = path + (part, name)
            if "/" not in name and name not in STANDARD_RESOURCES and not name.startswith("hugepages-"):
                yield Issue(p, f"{name!r} is not a standard resource name; extended resources need a "
                               "domain prefix such as nvidia.com/")
            elif "/" in name and qualified_name(name):
                yield Issue(p, f"resource name {qualified_name(name)}")
            value = parse_quantity(qty)
            if value is None:
                yield Issue(p, f"{short(qty)} is not a Kubernetes quantity (such as 2, 500m, 16Gi)")
                continue
            if value < 0:
                yield Issue(p, f"must not be negative, got {qty}")
            if "/" in name and not name.startswith(("kubernetes.io/", "requests.")) and value != value.to_integral():
                yield Issue(p, f"extended resource {name} must be a whole number, got {qty}")
            parsed.setdefault(part, {})[name] = value
    limits, requests = parsed.get("limits", {}), parsed.get("requests", {})
    for name, req in requests.items():
        if name in limits and req > limits[name]:
            yield Issue(path + ("requests", name), f"must be less than or equal to the limit ({limits[name]})")
        if "/" in name and name in limits and req != limits[name] and not name.startswith("kubernetes.io/"):
            yield Issue(path + ("requests", name), f"extended resource {name}: request must equal the limit")


def _container(c: dict, path: Path, *, complete: bool, volume_names: set[str] | None) -> Iterator[Issue]:
    name = c.get("name")
    if isinstance(name, str):
        problem = dns1123_label(name)
        if problem:
            yield Issue(path + ("name",), problem)
    if complete:
        image = c.get("image")
        if not isinstance(image, str) or not image.strip():
            yield Issue(path + ("image",), "is required")
        elif image != image.strip():
            yield Issue(path + ("image",), "must not have leading or trailing whitespace")
    yield from _env(c.get("env"), path + ("env",))
    yield from _resources(c.get("resources"), path + ("resources",))
    port_names: set[str] = set()
    for i, port in enumerate(_list(c.get("ports"))):
        port = _dict(port)
        p = path + ("ports", i)
        for key in ("containerPort", "hostPort"):
            n = port.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and not (1 <= n <= 65535):
                yield Issue(p + (key,), f"must be between 1 and 65535, got {n}")
        pname = port.get("name")
        if isinstance(pname, str):
            if len(pname) > 15 or not IANA_SVC_NAME.match(pname) or "--" in pname or not re.search("[a-z]", pname):
                yield Issue(p + ("name",), f"{pname!r} is not a port name (at most 15 lowercase letters, digits "
                                           "and '-', with a letter)")
            elif pname in port_names:
                yield Issue(p + ("name",), f"duplicate port name {pname!r}")
            port_names.add(pname)
    mount_paths: set[str] = set()
    for i, m in enumerate(_list(c.get("volumeMounts"))):
        m = _dict(m)
        p = path + ("volumeMounts", i)
        mpath = m.get("mountPath")
        if isinstance(mpath, str):
            if mpath in mount_paths:
                yield Issue(p + ("mountPath",), f"{mpath} is mounted twice in this container")
            mount_paths.add(mpath)
        sub = m.get("subPath")
        if isinstance(sub, str) and (sub.startswith("/") or _backsteps(sub)):
            yield Issue(p + ("subPath",), "must be a relative path without '..'")
        mname = m.get("name")
        if volume_names is not None and isinstance(mname, str) and mname not in volume_names:
            yield Issue(p + ("name",), f"names no volume of the pod ({mname!r})")


def pod_spec(spec: Any, path: Path, *, complete: bool) -> Iterator[Issue]:
    """Core v1 PodSpec rules. ``complete``: a whole pod (every container has an image, mounts name volumes);
    false for a TrainJob runtime patch, which is merged into the runtime's pod."""
    spec = _dict(spec)
    volume_names: set[str] = set()
    for i, vol in enumerate(_list(spec.get("volumes"))):
        vol = _dict(vol)
        p = path + ("volumes", i)
        vname = vol.get("name")
        if isinstance(vname, str):
            problem = dns1123_label(vname)
            if problem:
                yield Issue(p + ("name",), problem)
            volume_names.add(vname)
        host = _dict(vol.get("hostPath"))
        hp = host.get("path")
        if isinstance(hp, str) and _backsteps(hp):
            yield Issue(p + ("hostPath", "path"), f"{hp!r} must not contain '..'")
        sources = [k for k in vol if k != "name" and vol.get(k) is not None]
        if complete and len(sources) > 1:
            yield Issue(p, f"may have only one volume source, has {', '.join(sources)}")
        size = _dict(vol.get("emptyDir")).get("sizeLimit")
        if size is not None and parse_quantity(size) is None:
            yield Issue(p + ("emptyDir", "sizeLimit"), f"{short(size)} is not a Kubernetes quantity")
    names: set[str] = set()
    for part in ("initContainers", "containers"):
        for i, c in enumerate(_list(spec.get(part))):
            if not isinstance(c, dict):
                continue
            cname = c.get("name")
            if isinstance(cname, str):
                if cname in names:
                    yield Issue(path + (part, i, "name"), f"duplicate container name {cname!r}")
                names.add(cname)
            yield from _container(c, path + (part, i), complete=complete,
                                  volume_names=volume_names if complete else None)
    if complete and not _list(spec.get("containers")):
        yield Issue(path + ("containers",), "must have at least one container")
    for key in ("serviceAccountName", "schedulerName", "priorityClassName"):
        v = spec.get(key)
        if isinstance(v, str) and v:
            problem = dns1123_subdomain(v)  # ValidateServiceAccountName is NameIsDNSSubdomain too
            if problem:
                yield Issue(path + (key,), problem)
    yield from _string_map(spec.get("nodeSelector"), path + ("nodeSelector",), qualified_name, label_value)
    for i, tol in enumerate(_list(spec.get("tolerations"))):
        yield from _toleration(_dict(tol), path + ("tolerations", i))
    dns = spec.get("dnsPolicy")
    if isinstance(dns, str) and dns not in DNS_POLICIES:
        yield Issue(path + ("dnsPolicy",), f"must be one of {', '.join(DNS_POLICIES)}; got {dns!r}")
    if spec.get("hostNetwork") is True:
        for i, c in enumerate(_list(spec.get("containers"))):
            for j, port in enumerate(_list(_dict(c).get("ports"))):
                port = _dict(port)
                if port.get("hostPort") not in (None, port.get("containerPort")):
                    yield Issue(path + ("containers", i, "ports", j, "hostPort"),
                                "must equal containerPort with hostNetwork")


def _toleration(tol: dict, path: Path) -> Iterator[Issue]:
    try:
        rules.toleration(tol)
    except rules.RuleError as exc:
        yield Issue(path, exc.problem)


def pod_template(template: Any, path: Path, *, complete: bool) -> Iterator[Issue]:
    template = _dict(template)
    if "metadata" in template:
        yield from object_meta(template["metadata"], path + ("metadata",), top=False)
    yield from pod_spec(template.get("spec"), path + ("spec",), complete=complete)


# -------------------------------------------------------------------------------------- webhooks

from ddpctl.launch import PET_VARS  # noqa: E402  (one copy of the torch plugin's variables)


def pytorchjob(doc: dict) -> Iterator[Issue]:
    """Training Operator v1.9.4 webhook (pytorchjob_webhook.go L75-160) and pod rules."""
    yield from object_meta(doc.get("metadata"), ("metadata",), top=True, name_rule=dns1035_label)
    spec = _dict(doc.get("spec"))
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        yield Issue(("spec", "pytorchReplicaSpecs"), "must list the Master (and Worker) replicas")
        return
    for rtype, rspec in replicas.items():
        p = ("spec", "pytorchReplicaSpecs", rtype)
        if rtype not in ("Master", "Worker"):
            yield Issue(p, f"replica type {rtype!r} is not Master or Worker")
        rspec = _dict(rspec)
        template = _dict(rspec.get("template"))
        containers = _list(_dict(template.get("spec")).get("containers"))
        if not any(_dict(c).get("name") == "pytorch" for c in containers):
            yield Issue(p + ("template", "spec", "containers"), "needs a container named 'pytorch'")
        yield from pod_template(template, p + ("template",), complete=True)
    master = _dict(replicas.get("Master"))
    if "Master" in replicas and master.get("replicas") != 1:
        yield Issue(("spec", "pytorchReplicaSpecs", "Master", "replicas"),
                    f"must be set to exactly 1, got {short(master.get('replicas'))}")
    worker = _dict(replicas.get("Worker"))
    n = worker.get("replicas", 1)
    if "Worker" in replicas and isinstance(n, int) and n < 1:
        yield Issue(("spec", "pytorchReplicaSpecs", "Worker", "replicas"), f"must be at least 1, got {n}")
    if "elasticPolicy" in spec and "Worker" not in replicas:
        yield Issue(("spec", "elasticPolicy"), "needs a Worker replica spec")
    for rtype, rspec in replicas.items():
        policy = _dict(rspec).get("restartPolicy")
        if policy not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            yield Issue(("spec", "pytorchReplicaSpecs", rtype, "restartPolicy"),
                        f"must be one of Always, OnFailure, Never, ExitCode; got {short(policy)}")
    pclass = _dict(_dict(spec.get("runPolicy")).get("schedulingPolicy")).get("priorityClass")
    if isinstance(pclass, str) and pclass and dns1123_subdomain(pclass):
        yield Issue(("spec", "runPolicy", "schedulingPolicy", "priorityClass"), dns1123_subdomain(pclass) or "")
    clean = _dict(spec.get("runPolicy")).get("cleanPodPolicy")
    if clean not in (None, "All", "Running", "None"):
        yield Issue(("spec", "runPolicy", "cleanPodPolicy"), f"must be one of All, Running, None; got {short(clean)}")


def trainjob(doc: dict) -> Iterator[Issue]:
    """Trainer v2.3.0: webhook (torch.go L65-77), CEL on metadata.name, and the patched pods."""
    yield from object_meta(doc.get("metadata"), ("metadata",), top=True, name_rule=dns1035_label)
    spec = _dict(doc.get("spec"))
    trainer = _dict(spec.get("trainer"))
    for i, item in enumerate(_list(trainer.get("env"))):
        if _dict(item).get("name") in PET_VARS:
            yield Issue(("spec", "trainer", "env", i, "name"),
                        f"{item['name']} is set by the torch plugin; the webhook rejects it in trainer.env")
    yield from _env(trainer.get("env"), ("spec", "trainer", "env"))
    yield from _resources(trainer.get("resourcesPerNode"), ("spec", "trainer", "resourcesPerNode"))
    runtime = _dict(spec.get("runtimeRef")).get("name")
    if isinstance(runtime, str) and runtime and dns1123_subdomain(runtime):
        yield Issue(("spec", "runtimeRef", "name"), dns1123_subdomain(runtime) or "")
    image = trainer.get("image")
    if isinstance(image, str) and image != image.strip():
        yield Issue(("spec", "trainer", "image"), "must not have leading or trailing whitespace")
    for i, patch in enumerate(_list(spec.get("runtimePatches"))):
        jobs = _list(_dict(_dict(_dict(_dict(patch).get("trainingRuntimeSpec")).get("template")).get("spec"))
                     .get("replicatedJobs"))
        for j, rj in enumerate(jobs):
            template = _dict(_dict(_dict(rj).get("template")).get("spec")).get("template")
            p = ("spec", "runtimePatches", i, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", j,
                 "template", "spec", "template")
            yield from pod_template(template, p, complete=False)


# CEL rules of the bundled CRDs, by their exact text. Update-only rules map to None. A unit test fails when a
# CRD carries a rule that is in neither group, so an updated CRD cannot silently lose a check.
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
CEL_RULES: dict[str, Callable[[Any], bool] | None] = {
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')":
        lambda s: re.fullmatch("[a-z]([-a-z0-9]*[a-z0-9])?", str(_dict(_dict(s).get("metadata")).get("name", "")))
        is not None,  # the CEL rule's own regex, as written in the CRD
    "size(self.metadata.name) <= 63": lambda s: len(str(_dict(_dict(s).get("metadata")).get("name", ""))) <= 63,
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')":
        lambda s: not isinstance(s, str) or s == "" or _URI.match(s) is not None,
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']":
        lambda s: s in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"),
    "has(self.lastUpdatedTime)": lambda s: "lastUpdatedTime" in _dict(s),
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
