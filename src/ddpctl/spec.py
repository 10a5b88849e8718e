"""The job spec: one frozen, validated description of a distributed training job.

A spec comes from a YAML file (``-f job.yaml``), from CLI flags, or both (flags win). It is inert data:
no environment, clock, network or file access happens here except in :func:`load_spec`, which reads the
YAML file and nothing else. Everything downstream (launch contract, renderers, local engine) takes a
:class:`JobSpec` and never mutates it.

Errors name the offending key, its line in the file when it came from one, and the fix.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ddpctl import rules
from ddpctl.errors import SpecError, UsageError
from ddpctl.rules import RuleError
from ddpctl.secrets import SecretEnv

DEFAULT_NAME = "ddp"
DEFAULT_CPU_IMAGE = "ddpctl/ddp-train:cpu"
DEFAULT_GPU_IMAGE = "ddpctl/ddp-train:cuda"
DEFAULT_PORT = 29500
DEFAULT_COMMAND: tuple[str, ...] = ("ddp-train",)
MAX_NAME_LEN = 40  # leaves room for "-worker-<i>" / "-node-0-0" inside a 63-char DNS label
MAX_GPUS_PER_NODE = 16
MAX_NODES = 1024

# Patterns are matched with fullmatch (``$`` would also accept a trailing newline). Most value rules live in
# :mod:`ddpctl.rules`, shared with every target and the manifest validator.
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?|\[?[0-9A-Fa-f:]{2,39}\]?")
_IFNAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,15}")
_SLURM_TIME_RE = re.compile(r"(\d{1,4}-)?\d{1,3}(:\d{2}){0,2}")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31})?")


# --------------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Volume:
    """A bind mount: host ``source`` -> container ``target``."""

    source: str  # as written (a relative path starts with ./ or ~)
    target: str
    read_only: bool = False
    # The absolute host path, when :func:`load_spec` resolved a relative ``source`` (file values against the
    # file's directory, flag values against the current directory). Targets that run on this host use it.
    host: str | None = field(default=None, compare=False)

    @property
    def host_source(self) -> str:
        return self.host or self.source

    def __str__(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")

    def host_str(self) -> str:
        """``SOURCE:TARGET[:ro]`` with the resolved host source (compose, Slurm mounts)."""
        return f"{self.host_source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class NcclOptions:
    """Communication options that reach every process as env (NCCL_*, GLOO_*)."""

    socket_ifname: str | None = None  # NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME
    debug: str | None = None  # NCCL_DEBUG: WARN | INFO | TRACE
    ib_disable: bool = False  # NCCL_IB_DISABLE=1


@dataclass(frozen=True)
class KubernetesOptions:
    """Options that only the Kubernetes renderers (PyTorchJob, TrainJob) use."""

    namespace: str | None = None
    restart_policy: str = "OnFailure"  # OnFailure | ExitCode | Never
    backoff_limit: int = 3
    clean_pod_policy: str = "Running"  # Running | All | None
    ttl_seconds_after_finished: int = 3600
    active_deadline_seconds: int | None = None
    gang: bool = False  # runPolicy.schedulingPolicy.minAvailable = nodes
    scheduler_name: str | None = None
    queue: str | None = None  # schedulingPolicy.queue (Volcano)
    priority_class: str | None = None
    kueue_queue: str | None = None  # label kueue.x-k8s.io/queue-name
    istio_sidecar: bool = False  # False -> annotation sidecar.istio.io/inject: "false"
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    service_account: str | None = None
    runtime: str = "torch-distributed"  # TrainJob runtimeRef.name
    shm_size: int = 16 * 1024**3  # /dev/shm emptyDir sizeLimit when spec.shm_size is unset


@dataclass(frozen=True)
class SlurmOptions:
    """Options that only the Slurm renderer uses."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # [D-]HH:MM:SS
    cpus_per_task: int | None = None
    mem: str | None = None  # e.g. 64G, or 0 for all
    container: str = "none"  # none | pyxis | apptainer
    container_image: str | None = None  # default: the job image (docker:// for apptainer)
    output: str = "%x-%j.out"


@dataclass(frozen=True)
class JobSpec:
    """A validated job. Construct through :func:`spec_from_dict` / :func:`load_spec`."""

    name: str = DEFAULT_NAME
    image: str = ""  # "" -> DEFAULT_CPU_IMAGE or DEFAULT_GPU_IMAGE by gpus_per_node
    nodes: int = 1
    gpus_per_node: int = 0
    nproc_per_node: int = 0  # 0 -> gpus_per_node, or 1 on CPU
    device_ids: tuple[str, ...] = ()  # host GPU ids split across nodes sharing one host
    backend: str = "auto"  # auto | nccl | gloo
    port: int = DEFAULT_PORT
    command: tuple[str, ...] = DEFAULT_COMMAND
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()  # values never in a file: Kubernetes Secret / caller's environment
    volumes: tuple[Volume, ...] = ()
    workdir: str | None = None  # host dir mounted at /workspace and used as the working directory
    user: str | None = None  # uid[:gid] or name[:group] the containers run as (`up`: the caller's by default)
    ipc: str = "host"  # host | private
    shm_size: int | None = None  # bytes; only with ipc=private
    network: str = "bridge"  # bridge (one host, private network) | host (multi-host)
    hosts: tuple[str, ...] = ()  # one address per node for multi-host runs
    master_addr: str | None = None  # override the master address
    max_restarts: int = 0
    memlock: bool = False  # ulimit memlock=-1 (opt-in: needs a daemon allowed to raise it)
    cpus_per_node: float | None = None
    memory_per_node: int | None = None  # bytes
    nccl: NcclOptions = field(default_factory=NcclOptions)
    kubernetes: KubernetesOptions = field(default_factory=KubernetesOptions)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    workdir_host: str | None = field(default=None, compare=False)  # ``workdir`` resolved by load_spec

    # Derived values are properties, never stored twice.
    @property
    def resolved_workdir(self) -> str | None:
        """The host directory to mount at /workspace: absolute when :func:`load_spec` resolved it."""
        return self.workdir_host or self.workdir

    @property
    def resolved_image(self) -> str:
        if self.image:
            return self.image
        return DEFAULT_GPU_IMAGE if self.gpus_per_node else DEFAULT_CPU_IMAGE

    @property
    def procs_per_node(self) -> int:
        if self.nproc_per_node:
            return self.nproc_per_node
        return self.gpus_per_node or 1

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def resolved_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        return "nccl" if self.gpus_per_node else "gloo"

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def multi_host(self) -> bool:
        return len(self.hosts) > 1


# ----------------------------------------------------------------------------- YAML with line numbers


class _Lines:
    """Maps a key path (("nccl", "debug")) to its line in the source file."""

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        self.lines: dict[tuple[str, ...], int] = {}

    def where(self, path: tuple[str, ...]) -> str:
        key = ".".join(path).encode("unicode_escape").decode("ascii")  # a key with a line break stays one line
        line = self.lines.get(path)
        if self.source and line:
            return f"'{key}' ({self.source}:{line})"
        return f"'{key}'"


def _compose_yaml(text: str, source: str) -> tuple[Any, _Lines]:
    """YAML text -> plain data plus key lines, within :mod:`ddpctl.rules`' limits (size, depth, aliases).

    Only the safe loader's scalar types are built; tags, merge keys and over-long numbers are one-line errors.
    """
    import yaml

    lines = _Lines(source)
    root = rules.compose_yaml_bounded(text, source)
    if root is None:
        return {}, lines

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, yaml.MappingNode):
            if node.tag not in ("tag:yaml.org,2002:map",):
                raise SpecError(f"{source}:{node.start_mark.line + 1}: tag {node.tag!r} is not supported",
                                "remove the tag")
            out: dict[str, Any] = {}
            for knode, vnode in node.value:
                key = rules.construct_scalar(knode, source) if isinstance(knode, yaml.ScalarNode) else knode
                if not isinstance(key, str):
                    raise SpecError(
                        f"{source}:{knode.start_mark.line + 1}: a key is not a string",
                        "quote the key or remove it",
                    )
                sub = path + (key,)
                if key in out:
                    raise SpecError(
                        f"{source}:{knode.start_mark.line + 1}: key "
                        f"'{'.'.join(sub).encode('unicode_escape').decode('ascii')}' appears twice",
                        "keep one of them",
                    )
                lines.lines[sub] = knode.start_mark.line + 1
                out[key] = walk(vnode, sub)
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag not in ("tag:yaml.org,2002:seq",):
                raise SpecError(f"{source}:{node.start_mark.line + 1}: tag {node.tag!r} is not supported",
                                "remove the tag")
            return [walk(item, path) for item in node.value]
        return rules.construct_scalar(node, source)

    return walk(root, ()), lines


# ------------------------------------------------------------------------------------------ checkers


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    """A value for an error message: repr, shortened (a 5,000-digit number is not printed in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"... ({len(text)} characters)"


class _Checker:
    def __init__(self, lines: _Lines) -> None:
        self.lines = lines

    def fail(self, path: tuple[str, ...], problem: str, fix: str) -> SpecError:
        return SpecError(f"{self.lines.where(path)} {problem}", fix)

    def rule(self, path, fn: Callable[..., Any], value: Any, **kw: Any) -> Any:
        """Apply a :mod:`ddpctl.rules` rule; its error gets this key (and line) in front."""
        try:
            return fn(value, **kw)
        except RuleError as exc:
            raise self.fail(path, exc.problem, exc.fix) from None

    def integer(self, path, value, lo: int | None = None, hi: int | None = None) -> int:
        if isinstance(value, float) or not isinstance(value, (int, str)) or isinstance(value, bool):
            raise self.fail(path, f"must be an integer, got {_type_name(value)} {_show(value)}",
                            "write a whole number")
        return self.rule(path, rules.integer, value, lo=lo, hi=hi, what="the value")

    def boolean(self, path, value) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        raise self.fail(path, f"must be true or false, got {_type_name(value)} {_show(value)}",
                        "write true or false")

    def string(self, path, value, pattern: re.Pattern | None = None, what: str = "") -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(path, f"must be a string, got {_type_name(value)} {_show(value)}", "write a string")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(path, f"must be a string, got {value}", "write a string")
        value = str(value) if not isinstance(value, int) or abs(value) < 10**30 else _show(value)
        if not value:
            raise self.fail(path, "must not be empty", "give a value or remove the key")
        self.rule(path, rules.text, value)
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(path, f"{_show(value)} is not {what}", f"use {what}")
        return value

    def choice(self, path, value, choices: tuple[str, ...]) -> str:
        value = self.string(path, value)
        if value not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {_show(value)}",
                            f"use one of {', '.join(choices)}")
        return value

    def str_list(self, path, value, pattern: re.Pattern | None = None, what: str = "") -> tuple[str, ...]:
        if isinstance(value, str):
            value = [v for v in re.split(r"[,\s]+", value) if v]
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {_type_name(value)} {_show(value)}", "write a YAML list")
        return tuple(self.string(path, v, pattern, what) for v in value)

    def size(self, path, value) -> int:
        return self.rule(path, rules.size_bytes, value)

    def mapping(self, path, value) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {_type_name(value)} {_show(value)}",
                            "write 'key: value' pairs under it")
        return value


def parse_size(value: Any, fail: Callable[[str], Exception] | None = None) -> int:
    """'16g', '16G', '16gb', '16Gi', '512m', 1024 -> bytes (binary units); see :func:`ddpctl.rules.size_bytes`."""
    try:
        return rules.size_bytes(value)
    except RuleError as exc:
        if fail:
            raise fail(exc.problem) from None
        raise


def format_size(nbytes: int, style: str = "docker") -> str:
    """Bytes -> '16g' (docker/compose) or '16Gi' (Kubernetes quantity), exact, largest unit."""
    units = ["", "k", "m", "g", "t"]
    exp = 0
    while exp < 4 and nbytes % 1024 ** (exp + 1) == 0:
        exp += 1
    value = nbytes // 1024**exp
    if style == "k8s":
        return f"{value}{['', 'Ki', 'Mi', 'Gi', 'Ti'][exp]}"
    return f"{value}{units[exp]}" if exp else str(value)


# -------------------------------------------------------------------------------------- construction

_INTERNAL_FIELDS = {"workdir_host"}  # filled in by load_spec, never a key of the file
_TOP_KEYS = {f.name for f in dataclasses.fields(JobSpec)} - _INTERNAL_FIELDS
_SUB_KEYS = {
    "nccl": {f.name for f in dataclasses.fields(NcclOptions)},
    "kubernetes": {f.name for f in dataclasses.fields(KubernetesOptions)},
    "slurm": {f.name for f in dataclasses.fields(SlurmOptions)},
}


def _unknown(ck: _Checker, path: tuple[str, ...], key: str, known: set[str]) -> SpecError:
    import difflib

    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(sorted(known))}"
    return ck.fail(path + (key,), "is not a known key", hint)


def _volume(ck: _Checker, path, value) -> Volume:
    if isinstance(value, str):
        ck.rule(path, rules.text, value, what="volume")
        parts = value.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            raise ck.fail(path, f"volume {_show(value)} is not SOURCE:TARGET[:ro] (paths cannot contain ':')",
                          "write e.g. ./data:/data:ro")
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise ck.fail(path, f"volume mode {_show(mode)} is not ro or rw", "end the volume with :ro or :rw")
        source, target, ro = parts[0], parts[1], mode == "ro"
    elif isinstance(value, dict):
        extra = set(value) - {"source", "target", "read_only"}
        if extra:
            raise ck.fail(path, f"volume has unknown key(s) {', '.join(sorted(map(str, extra)))}",
                          "use source, target and read_only")
        if "source" not in value or "target" not in value:
            raise ck.fail(path, "volume needs both source and target", "add the missing key")
        source = ck.string(path, value["source"])
        target = ck.string(path, value["target"])
        ro = ck.boolean(path, value.get("read_only", False))
    else:
        raise ck.fail(path, f"volume must be a string or a mapping, got {_type_name(value)}",
                      "write e.g. ./data:/data:ro")
    if "/" not in source and not source.startswith((".", "~")):
        raise ck.fail(path, f"volume source {_show(source)} is a name, not a path (Docker and compose would "
                            "make a named volume, Kubernetes and Slurm cannot)",
                      f"write ./{source} for a directory here, or an absolute path")
    source = ck.rule(path, rules.host_path, source, what="volume source")
    target = ck.rule(path, rules.container_path, target, what="volume target")
    return Volume(source, target, ro)


def _env(ck: _Checker, path, value) -> tuple[tuple[str, str], ...]:
    if isinstance(value, list):  # ["K=V", ...]
        pairs = []
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise ck.fail(path, f"env entry {_show(item)} is not KEY=VALUE", "write KEY=VALUE")
            k, v = item.split("=", 1)
            pairs.append((k, v))
    else:
        pairs = list(ck.mapping(path, value).items())
    if len(pairs) > rules.MAX_ENV_ENTRIES:
        raise ck.fail(path, f"has {len(pairs)} entries (more than {rules.MAX_ENV_ENTRIES})",
                      "pass large configuration as a file in a volume")
    out = []
    for k, v in pairs:
        kp = path + (str(k),)
        if not isinstance(k, str):
            raise ck.fail(kp, "is not a valid environment variable name", "use letters, digits and _")
        ck.rule(kp, rules.user_env_name, k)
        if isinstance(v, bool):
            v = "1" if v else "0"
        if v is None or isinstance(v, (list, dict)):
            raise ck.fail(kp, f"must be a scalar value, got {_type_name(v)}", "write a string or number")
        if isinstance(v, float) and not math.isfinite(v):
            raise ck.fail(kp, f"is {v}, which every target would write differently", "quote the value")
        if isinstance(v, int) and abs(v) >= 10**30:
            raise ck.fail(kp, f"is {_show(v)}", "quote the value")
        v = str(v)
        ck.rule(kp, rules.env_value, v)
        out.append((k, v))
    merged: dict[str, str] = {}
    for k, v in out:  # a key given twice (file list + flag): the later value wins
        merged.pop(k, None)
        merged[k] = v
    return tuple(merged.items())


def _secret_env(ck: _Checker, path, value) -> tuple[SecretEnv, ...]:
    from ddpctl import secrets
    from ddpctl.rules import RuleError

    try:
        return secrets.parse(value)
    except RuleError as exc:
        raise ck.fail(path, exc.problem, exc.fix) from None


def _sub(ck: _Checker, name: str, value: Any, cls: type) -> Any:
    path = (name,)
    data = ck.mapping(path, value)
    known = _SUB_KEYS[name]
    for key in data:
        if key not in known:
            raise _unknown(ck, path, key, known)
    kw: dict[str, Any] = {}
    for key, v in data.items():
        p = path + (key,)
        if v is None:
            continue
        kw[key] = _SUB_FIELDS[name][key](ck, p, v)
    return cls(**kw)


_NAME_WHAT = "a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"


def _k8s_name(fn: Callable[..., str], what: str, label_value: bool = False) -> Callable[..., str]:
    """A Kubernetes object name (``fn``: a DNS rule), also a label value when ``label_value``."""
    def check(ck: _Checker, p, v) -> str:
        v = ck.string(p, v)
        ck.rule(p, fn, v, what=what)
        if label_value:
            ck.rule(p, rules.label_value, v, what=what)
        return v
    return check


def _node_selector(ck: _Checker, p, v) -> tuple[tuple[str, str], ...]:
    out = []
    for k, x in ck.mapping(p, v).items():
        kp = p + (str(k),)
        ck.rule(kp, rules.label_key, k, what="node selector key")
        x = ck.string(kp, x) if not isinstance(x, str) else x
        ck.rule(kp, rules.label_value, x, what="node selector value")
        out.append((k, x))
    return tuple(out)


_SUB_FIELDS: dict[str, dict[str, Callable[..., Any]]] = {
    "nccl": {
        "socket_ifname": lambda ck, p, v: ck.string(p, v, _IFNAME_RE, "a network interface name such as eth0"),
        "debug": lambda ck, p, v: ck.choice(p, str(v).upper() if isinstance(v, str) else v,
                                            ("VERSION", "WARN", "INFO", "TRACE")),
        "ib_disable": lambda ck, p, v: ck.boolean(p, v),
    },
    "kubernetes": {
        "namespace": _k8s_name(rules.dns1123_label, "namespace"),
        "restart_policy": lambda ck, p, v: ck.choice(p, v, ("OnFailure", "ExitCode", "Never")),
        "backoff_limit": lambda ck, p, v: ck.integer(p, v, 0, 1000),
        "clean_pod_policy": lambda ck, p, v: ck.choice(p, v, ("Running", "All", "None")),
        "ttl_seconds_after_finished": lambda ck, p, v: ck.integer(p, v, 0, rules.INT32_MAX),
        "active_deadline_seconds": lambda ck, p, v: ck.integer(p, v, 1, rules.INT64_MAX),
        "gang": lambda ck, p, v: ck.boolean(p, v),
        "scheduler_name": _k8s_name(rules.dns1123_subdomain, "scheduler name"),
        "queue": _k8s_name(rules.dns1123_subdomain, "queue name"),
        "priority_class": _k8s_name(rules.dns1123_subdomain, "priority class name"),
        "kueue_queue": _k8s_name(rules.dns1123_subdomain, "Kueue LocalQueue name", label_value=True),
        "istio_sidecar": lambda ck, p, v: ck.boolean(p, v),
        "node_selector": _node_selector,
        "tolerations": lambda ck, p, v: _tolerations(ck, p, v),
        "service_account": _k8s_name(rules.dns1123_subdomain, "service account name"),
        "runtime": _k8s_name(rules.dns1123_subdomain, "ClusterTrainingRuntime name"),
        "shm_size": lambda ck, p, v: ck.size(p, v),
    },
    "slurm": {
        "partition": lambda ck, p, v: ck.string(p, v),
        "account": lambda ck, p, v: ck.string(p, v),
        "qos": lambda ck, p, v: ck.string(p, v),
        "time": lambda ck, p, v: ck.string(p, v, _SLURM_TIME_RE, "a Slurm time such as 02:00:00 or 1-00:00:00"),
        "cpus_per_task": lambda ck, p, v: ck.integer(p, v, 1, 100_000),
        "mem": lambda ck, p, v: ck.string(p, v, re.compile(r"\d{1,15}[KMGT]?"), "a Slurm memory size such as 64G"),
        "container": lambda ck, p, v: ck.choice(p, v, ("none", "pyxis", "apptainer")),
        "container_image": lambda ck, p, v: ck.rule(p, rules.container_image, ck.string(p, v)),
        "output": lambda ck, p, v: ck.string(p, v),
    },
}


def _tolerations(ck: _Checker, path, value) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list):
        raise ck.fail(path, f"must be a list of tolerations, got {_type_name(value)}", "write a YAML list")
    return tuple(ck.rule(path, rules.toleration, item) for item in value)


def spec_from_dict(data: Mapping[str, Any], *, source: str | None = None,
                   _lines: _Lines | None = None) -> JobSpec:
    """Validate a plain mapping (from YAML, flags or code) into a :class:`JobSpec`."""
    lines = _lines or _Lines(source)
    ck = _Checker(lines)
    if not isinstance(data, Mapping):
        raise SpecError(f"{source or 'the spec'} must be a mapping of keys, got {_type_name(data)}",
                        "start the file with keys such as 'name:' and 'nodes:'")
    for key in data:
        if key not in _TOP_KEYS:
            raise _unknown(ck, (), str(key), _TOP_KEYS)

    kw: dict[str, Any] = {}
    g = data.get
    g = data.get
    for key, value in data.items():
        if value is None:
            continue
        p = (key,)
        if key == "name":
            value = ck.string(p, value)
            if len(value) > MAX_NAME_LEN or not rules._DNS1035_LABEL_RE.fullmatch(value):
                raise ck.fail(p, f"{_show(value)} is not {_NAME_WHAT} of at most {MAX_NAME_LEN} characters",
                              "use e.g. 'resnet-ddp'")
            kw[key] = value
        elif key == "image":
            kw[key] = ck.rule(p, rules.image_ref, ck.string(p, value))
        elif key == "nodes":
            kw[key] = ck.integer(p, value, 1, MAX_NODES)
        elif key == "gpus_per_node":
            kw[key] = ck.integer(p, value, 0, MAX_GPUS_PER_NODE)
        elif key == "nproc_per_node":
            kw[key] = ck.integer(p, value, 1, 256)
        elif key == "device_ids":
            kw[key] = tuple(ck.rule(p, rules.device_id, v) for v in ck.str_list(p, value))
        elif key == "backend":
            kw[key] = ck.choice(p, value, ("auto", "nccl", "gloo"))
        elif key == "port":
            kw[key] = ck.integer(p, value, 1024, 65535)
        elif key == "command":
            if isinstance(value, str):
                import shlex

                try:
                    value = shlex.split(value)
                except ValueError as exc:
                    raise ck.fail(p, f"cannot be split into words ({exc})", "balance the quotes") from None
            if isinstance(value, list) and not value:
                raise ck.fail(p, "must not be empty", "give a command such as ['python', 'train.py']")
            if not isinstance(value, list):
                raise ck.fail(p, f"must be a list or a string, got {_type_name(value)}",
                              "give a command such as ['python', 'train.py']")
            kw[key] = ck.rule(p, rules.command, [ck.string(p, w) for w in value])
        elif key == "env":
            kw[key] = _env(ck, p, value)
        elif key == "secret_env":
            kw[key] = _secret_env(ck, p, value)
        elif key == "volumes":
            if not isinstance(value, list):
                raise ck.fail(p, f"must be a list, got {_type_name(value)}", "write a YAML list of SOURCE:TARGET")
            kw[key] = tuple(_volume(ck, p, v) for v in value)
        elif key == "workdir":
            kw[key] = ck.rule(p, rules.host_path, ck.string(p, value), what="workdir")
        elif key == "user":
            kw[key] = ck.string(p, value, _USER_RE, "a user such as 1000:1000, 1000 or root")
        elif key == "ipc":
            kw[key] = ck.choice(p, value, ("host", "private"))
        elif key == "shm_size":
            kw[key] = ck.size(p, value)
        elif key == "network":
            kw[key] = ck.choice(p, value, ("bridge", "host"))
        elif key == "hosts":
            kw[key] = ck.str_list(p, value, _HOST_RE, "a host name or IP address")
        elif key == "master_addr":
            kw[key] = ck.string(p, value, _HOST_RE, "a host name or IP address")
        elif key == "max_restarts":
            kw[key] = ck.integer(p, value, 0, 100)
        elif key == "memlock":
            kw[key] = ck.boolean(p, value)
        elif key == "cpus_per_node":
            if isinstance(value, str) or isinstance(value, bool):
                raise ck.fail(p, f"must be a number, got {_type_name(value)} {_show(value)}", "write a number")
            kw[key] = ck.rule(p, rules.cpus, value, what="the value")
        elif key == "memory_per_node":
            kw[key] = ck.size(p, value)
        elif key == "nccl":
            kw[key] = _sub(ck, key, value, NcclOptions)
        elif key == "kubernetes":
            kw[key] = _sub(ck, key, value, KubernetesOptions)
        elif key == "slurm":
            kw[key] = _sub(ck, key, value, SlurmOptions)
        else:  # pragma: no cover - _TOP_KEYS and this chain are kept in step by a unit test
            raise _unknown(ck, (), key, _TOP_KEYS)

    # ---- cross-field rules
    both = {k for k, _ in kw.get("env", ())} & {s.name for s in kw.get("secret_env", ())}
    if both:
        raise ck.fail(("secret_env",), f"sets {', '.join(sorted(both))}, which env sets too",
                      "keep each variable in one of env and secret_env")
    if g("ipc") == "host" and g("shm_size") is not None:
        raise ck.fail(("shm_size",), "cannot be combined with ipc: host (Docker silently ignores the size)",
                      "remove shm_size to share the host's /dev/shm, or set ipc: private")
    if "shm_size" in kw:
        kw["ipc"] = "private"
    gpus = kw.get("gpus_per_node", 0)
    nodes = kw.get("nodes", 1)
    if "nproc_per_node" in kw and gpus and kw["nproc_per_node"] != gpus:
        raise ck.fail(("nproc_per_node",), f"is {kw['nproc_per_node']} but gpus_per_node is {gpus}",
                      "DDP runs one process per GPU: drop nproc_per_node or make it equal gpus_per_node")
    if kw.get("backend") == "nccl" and not gpus:
        raise ck.fail(("backend",), "is nccl but gpus_per_node is 0 (NCCL needs GPUs)",
                      "use backend: gloo (or auto) for CPU runs, or set gpus_per_node")
    if kw.get("device_ids"):
        ids = kw["device_ids"]
        if not gpus:
            raise ck.fail(("device_ids",), "is set but gpus_per_node is 0", "set gpus_per_node or drop device_ids")
        per_host_nodes = 1 if kw.get("hosts") else nodes
        if len(set(ids)) != len(ids):  # ids are normalised by rules.device_id: '00' and '0' are one GPU
            raise ck.fail(("device_ids",), "lists a GPU twice", "list each GPU once")
        if per_host_nodes * gpus > len(ids):
            raise ck.fail(("gpus_per_node",),
                          f"{per_host_nodes} node(s) x {gpus} GPUs need {per_host_nodes * gpus} GPUs "
                          f"but device_ids lists {len(ids)}",
                          "lower gpus_per_node or nodes, or list more device_ids")
    hosts = kw.get("hosts", ())
    if hosts:
        if len(hosts) != nodes:
            raise ck.fail(("hosts",), f"lists {len(hosts)} host(s) but nodes is {nodes}",
                          "give one host per node (or drop hosts for a single-host run)")
        if len({h.lower() for h in hosts}) != len(hosts):
            raise ck.fail(("hosts",), "lists a host twice", "give one distinct host per node")
        if len(hosts) > 1 and kw.get("network", "bridge") != "host":
            raise ck.fail(("network",), "must be host for a multi-host run (bridge networks do not span hosts)",
                          "set network: host")
    targets = [v.target for v in kw.get("volumes", ())]
    if kw.get("workdir"):
        targets.append("/workspace")
    seen: set[str] = set()
    for t in targets:
        if t in seen:
            what = " (the workdir is mounted there)" if t == "/workspace" and kw.get("workdir") else ""
            raise ck.fail(("volumes",), f"mounts two sources onto {t}{what}", "give every volume its own target")
        seen.add(t)
    return JobSpec(**kw)


def load_spec(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> JobSpec:
    """Read ``path`` (YAML) if given, apply ``overrides`` (flags; None values mean 'not given').

    Overrides use the spec's keys; nested keys are dotted (``kubernetes.namespace``).

    Relative host paths (``volumes`` sources, ``workdir``) are resolved here, once, so every target mounts the
    same directory: values from the file against the file's directory, values from flags against the current
    directory (:attr:`Volume.host`, :attr:`JobSpec.workdir_host`).
    """
    data: dict[str, Any] = {}
    lines = _Lines()
    file_dir: str | None = None
    if path is not None:
        p = Path(path)
        try:
            with open(p, "rb") as fh:
                raw = fh.read(rules.MAX_SPEC_BYTES + 1)
            if len(raw) > rules.MAX_SPEC_BYTES:
                raise UsageError(f"job file {str(p)!r} is larger than {rules.MAX_SPEC_BYTES} bytes",
                                 "a job spec is a few hundred bytes; check that this is the right file")
            text = raw.decode("utf-8")
        except FileNotFoundError:
            raise UsageError(f"job file {str(p)!r} does not exist", "check the path given to -f") from None
        except IsADirectoryError:
            raise UsageError(f"job file {str(p)!r} is a directory", "give the path of a YAML file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read job file {str(p)!r} ({exc.__class__.__name__})",
                             "check the file's permissions and encoding") from None
        loaded, lines = _compose_yaml(text, str(p))
        if not isinstance(loaded, dict):
            raise SpecError(f"{p} must be a mapping of keys, got {_type_name(loaded)}",
                            "start the file with keys such as 'name:' and 'nodes:'")
        data = loaded
        file_dir = os.path.dirname(os.path.abspath(p))
    from_flags: set[str] = set()
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        from_flags.add(key)
        if "." in key:
            top, sub = key.split(".", 1)
            if data.get(top) is None:
                data[top] = {}
            section = data[top]
            if isinstance(section, dict):  # an invalid section is reported by validation, never dropped
                section[sub] = value
                lines.lines.pop((top, sub), None)
        elif key == "secret_env" and isinstance(value, list) and data.get("secret_env") is not None:
            from ddpctl import secrets

            data["secret_env"] = secrets.merge(data["secret_env"], value)  # flags add / override per name
        elif key == "env" and isinstance(value, list) and isinstance(data.get("env"), (dict, list)):
            data["env"] = _merge_env(data["env"], value)  # flags add to / override the file's env per key
        else:
            data[key] = value
            lines.lines.pop((key,), None)
    spec = spec_from_dict(data, _lines=lines)
    return _resolve_host_paths(spec, volumes_base=None if "volumes" in from_flags else file_dir,
                               workdir_base=None if "workdir" in from_flags else file_dir)


def resolve_host_path(path: str, base: str | None = None) -> str:
    """An absolute, normalised host path: ``~`` expanded, a relative path joined to ``base`` (default: cwd)."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(base or os.getcwd(), expanded)
    return os.path.normpath(expanded)


def _resolve_host_paths(spec: JobSpec, *, volumes_base: str | None, workdir_base: str | None) -> JobSpec:
    vols = tuple(dataclasses.replace(v, host=resolve_host_path(v.source, volumes_base))
                 if rules.is_relative_path(v.source) else v for v in spec.volumes)
    workdir_host = None
    if spec.workdir and rules.is_relative_path(spec.workdir):
        workdir_host = resolve_host_path(spec.workdir, workdir_base)
    for what, value in [("volume source", v.host) for v in vols if v.host] + [("workdir", workdir_host)]:
        if value is not None:  # the resolved path must still be one compose/apptainer can mount
            try:
                rules.host_path(value, what=what)
            except RuleError as exc:
                raise SpecError(f"{what} resolves to {value!r}: {exc.problem}", exc.fix) from None
    return dataclasses.replace(spec, volumes=vols, workdir_host=workdir_host)


def _merge_env(file_env: dict | list, flags: list) -> dict | list:
    """The file's env with ``KEY=VALUE`` flags added or overriding per key (validation happens later)."""
    if isinstance(file_env, list):
        return file_env + list(flags)  # _env keeps the last value of a repeated key
    if not all(isinstance(f, str) and "=" in f for f in flags):
        return list(flags)  # a malformed flag: let validation report it
    merged = dict(file_env)
    for item in flags:
        k, v = item.split("=", 1)
        merged.pop(k, None)  # an overridden key moves to the end, like a later flag
        merged[k] = v
    return merged


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    """A plain mapping that :func:`spec_from_dict` turns back into an equal spec (for `--dry-run`)."""
    out: dict[str, Any] = {}
    default = JobSpec()
    for f in dataclasses.fields(JobSpec):
        if f.name in _INTERNAL_FIELDS:
            continue
        value = getattr(spec, f.name)
        if value == getattr(default, f.name):
            continue
        if f.name in ("nccl", "kubernetes", "slurm"):
            sub_default = type(value)()
            value = {k.name: getattr(value, k.name) for k in dataclasses.fields(value)
                     if getattr(value, k.name) != getattr(sub_default, k.name)}
            if "node_selector" in value:
                value["node_selector"] = dict(value["node_selector"])
            if "tolerations" in value:
                value["tolerations"] = [dict(t) for t in value["tolerations"]]
        elif f.name == "env":
            value = dict(value)
        elif f.name == "secret_env":
            value = {e.name: (None if e.secret is None else e.secret + (f":{e.key}" if e.key else ""))
                     for e in value}
        elif f.name == "volumes":
            value = [str(v) for v in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out

