"""Core v1 pod template rules (the subset a hand edit breaks), for the manifest validator
(:mod:`ddpctl.validate.k8s`, which lists them)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Iterator

from ddpctl import rules
from ddpctl.validate.meta import (
    CONFIG_KEY,
    ENV_NAME_K8S,
    IANA_SVC_NAME,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    object_meta,
    parse_quantity,
    qualified_name,
    string_map_issues,
)
from ddpctl.validate.schema import Issue, Path, short

# ------------------------------------------------------------------------------------- pod spec

DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _entries(parent: dict, key: str, path: Path) -> Iterator[tuple[Path, dict]]:
    """(path, mapping) of each item of list ``parent[key]`` (a non-mapping item as an empty one)."""
    for i, item in enumerate(as_list(parent.get(key))):
        yield path + (key, i), as_dict(item)


def _backsteps(p: str) -> bool:
    return ".." in p.replace("\\", "/").split("/")


def env_issues(env: Any, path: Path) -> Iterator[Issue]:
    for i, item in enumerate(as_list(env)):
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
            kinds = [k for k in as_dict(source) if as_dict(source).get(k) is not None]
            if len(kinds) != 1:
                yield Issue(p + ("valueFrom",), f"must have exactly one source, has {len(kinds)}")
            for kind in ("secretKeyRef", "configMapKeyRef"):
                ref = as_dict(as_dict(source).get(kind))
                if kind in as_dict(source):
                    rname, rkey = ref.get("name"), ref.get("key")
                    if not isinstance(rname, str) or not rname:
                        yield Issue(p + ("valueFrom", kind, "name"), "is required (the Secret/ConfigMap name)")
                    elif dns1123_subdomain(rname):
                        yield Issue(p + ("valueFrom", kind, "name"), dns1123_subdomain(rname) or "")
                    if isinstance(rkey, str) and (len(rkey) > 253 or not CONFIG_KEY.match(rkey)):
                        yield Issue(p + ("valueFrom", kind, "key"),
                                    f"{rkey!r} is not a valid key (letters, digits, '-', '_' or '.')")


def resources_issues(res: Any, path: Path) -> Iterator[Issue]:
    res = as_dict(res)
    parsed: dict[str, dict[str, Decimal]] = {}
    for part in ("limits", "requests"):
        for name, qty in as_dict(res.get(part)).items():
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
    yield from env_issues(c.get("env"), path + ("env",))
    yield from resources_issues(c.get("resources"), path + ("resources",))
    port_names: set[str] = set()
    for p, port in _entries(c, "ports", path):
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
    for p, m in _entries(c, "volumeMounts", path):
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
    spec = as_dict(spec)
    volume_names: set[str] = set()
    for p, vol in _entries(spec, "volumes", path):
        vname = vol.get("name")
        if isinstance(vname, str):
            problem = dns1123_label(vname)
            if problem:
                yield Issue(p + ("name",), problem)
            volume_names.add(vname)
        host = as_dict(vol.get("hostPath"))
        hp = host.get("path")
        if isinstance(hp, str) and _backsteps(hp):
            yield Issue(p + ("hostPath", "path"), f"{hp!r} must not contain '..'")
        sources = [k for k in vol if k != "name" and vol.get(k) is not None]
        if complete and len(sources) > 1:
            yield Issue(p, f"may have only one volume source, has {', '.join(sources)}")
        size = as_dict(vol.get("emptyDir")).get("sizeLimit")
        if size is not None and parse_quantity(size) is None:
            yield Issue(p + ("emptyDir", "sizeLimit"), f"{short(size)} is not a Kubernetes quantity")
    names: set[str] = set()
    for part in ("initContainers", "containers"):
        for i, c in enumerate(as_list(spec.get(part))):
            if not isinstance(c, dict):
                continue
            cname = c.get("name")
            if isinstance(cname, str):
                if cname in names:
                    yield Issue(path + (part, i, "name"), f"duplicate container name {cname!r}")
                names.add(cname)
            yield from _container(c, path + (part, i), complete=complete,
                                  volume_names=volume_names if complete else None)
    if complete and not as_list(spec.get("containers")):
        yield Issue(path + ("containers",), "must have at least one container")
    for key in ("serviceAccountName", "schedulerName", "priorityClassName"):
        v = spec.get(key)
        if isinstance(v, str) and v:
            problem = dns1123_subdomain(v)  # ValidateServiceAccountName is NameIsDNSSubdomain too
            if problem:
                yield Issue(path + (key,), problem)
    yield from string_map_issues(spec.get("nodeSelector"), path + ("nodeSelector",), qualified_name, label_value)
    for p, tol in _entries(spec, "tolerations", path):
        yield from _toleration(tol, p)
    dns = spec.get("dnsPolicy")
    if isinstance(dns, str) and dns not in DNS_POLICIES:
        yield Issue(path + ("dnsPolicy",), f"must be one of {', '.join(DNS_POLICIES)}; got {dns!r}")
    if spec.get("hostNetwork") is True:
        for i, c in enumerate(as_list(spec.get("containers"))):
            for j, port in enumerate(as_list(as_dict(c).get("ports"))):
                port = as_dict(port)
                if port.get("hostPort") not in (None, port.get("containerPort")):
                    yield Issue(path + ("containers", i, "ports", j, "hostPort"),
                                "must equal containerPort with hostNetwork")


def _toleration(tol: dict, path: Path) -> Iterator[Issue]:
    try:
        rules.toleration(tol)
    except rules.RuleError as exc:
        yield Issue(path, exc.problem)


def pod_template(template: Any, path: Path, *, complete: bool) -> Iterator[Issue]:
    template = as_dict(template)
    if "metadata" in template:
        yield from object_meta(template["metadata"], path + ("metadata",), top=False)
    yield from pod_spec(template.get("spec"), path + ("spec",), complete=complete)
