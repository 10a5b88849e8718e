"""Plain data <-> :class:`JobSpec`: every key checked by its entry in the field table, then the rules that relate
two fields (:func:`cross_checks`). ``spec_to_dict`` is the inverse (``--dry-run``, round trips)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ddpctl.errors import SpecError
from ddpctl.spec import checks as c
from ddpctl.spec.fields import FIELDS, TOP_KEYS
from ddpctl.spec.lines import Lines
from ddpctl.spec.model import INTERNAL_FIELDS, JobSpec


def spec_from_dict(data: Mapping[str, Any], *, source: str | None = None, _lines: Any = None) -> JobSpec:
    """Validate a plain mapping (from YAML, flags or code) into a :class:`JobSpec`."""
    lines = _lines or Lines(source)
    ck = c.Checker(lines)
    if not isinstance(data, Mapping):
        raise SpecError(f"{source or 'the spec'} must be a mapping of keys, got {c.type_name(data)}",
                        "start the file with keys such as 'name:' and 'nodes:'")
    for key in data:
        if key not in TOP_KEYS:
            raise c.unknown(ck, (), str(key), TOP_KEYS)
    kw = {key: FIELDS[key].check(ck, (key,), value) for key, value in data.items() if value is not None}
    if isinstance(kw.get("nodes"), tuple):  # nodes: MIN:MAX
        if kw.get("min_nodes") is not None and kw["min_nodes"] != kw["nodes"][0]:
            raise ck.fail(("min_nodes",), f"is {kw['min_nodes']} but nodes says {data['nodes']}",
                          "give the range once: nodes: MIN:MAX")
        kw["min_nodes"], kw["nodes"] = kw["nodes"]
    if len(kw.get("docker_hosts", ())) > 1 and "network" not in kw:
        kw["network"] = "host"  # nodes on several Docker hosts reach each other through the hosts' networks
    if "shm_size" in kw:
        kw["ipc"] = "private"  # a size implies a private /dev/shm (ipc: host written next to it is refused below)
    spec = JobSpec(**kw)
    cross_checks(ck, spec, data)
    return spec


def cross_checks(ck: c.Checker, spec: JobSpec, data: Mapping[str, Any]) -> None:
    """The rules that relate two or more fields, on the built spec (a field left unset has its default);
    ``data`` is what was written, for a rule about an explicit value."""
    both = {k for k, _ in spec.env} & {s.name for s in spec.secret_env}
    if both:
        raise ck.fail(("secret_env",), f"sets {', '.join(sorted(both))}, which env sets too",
                      "keep each variable in one of env and secret_env")
    if spec.tensorboard and any(k == "DDPCTL_TENSORBOARD" for k, _ in spec.env):  # launch.TENSORBOARD_ENV
        raise ck.fail(("env",), "sets DDPCTL_TENSORBOARD, which tensorboard sets to the job's directory for the event "
                      "files", "drop it from env (or drop tensorboard and give your program its own directory)")
    if data.get("ipc") == "host" and data.get("shm_size") is not None:
        raise ck.fail(("shm_size",), "cannot be combined with ipc: host (Docker silently ignores the size)",
                      "remove shm_size to share the host's /dev/shm, or set ipc: private")
    gpus, nodes = spec.gpus_per_node, spec.nodes
    if spec.min_nodes is not None and spec.min_nodes > nodes:
        raise ck.fail(("min_nodes",), f"is {spec.min_nodes}, more than nodes ({nodes})",
                      "write nodes: MIN:MAX with MIN <= MAX")
    if spec.elastic and spec.hosts:
        raise ck.fail(("nodes",), f"is the range {spec.nodes_range}, but hosts lists a fixed set of hosts",
                      "use a fixed node count with hosts, or drop hosts for an elastic job")
    if spec.slurm.signal_seconds and not spec.slurm.time:
        raise ck.fail(("slurm", "signal_seconds"), "needs a time limit to count back from",
                      "set slurm.time (--time), or drop signal_seconds")
    if spec.nproc_per_node and gpus and spec.nproc_per_node != gpus:
        raise ck.fail(("nproc_per_node",), f"is {spec.nproc_per_node} but gpus_per_node is {gpus}",
                      "DDP runs one process per GPU: drop nproc_per_node or make it equal gpus_per_node")
    if spec.backend == "nccl" and not gpus:
        raise ck.fail(("backend",), "is nccl but gpus_per_node is 0 (NCCL needs GPUs)",
                      "use backend: gloo (or auto) for CPU runs, or set gpus_per_node")
    if spec.device_ids:
        ids = spec.device_ids
        if not gpus:
            raise ck.fail(("device_ids",), "is set but gpus_per_node is 0", "set gpus_per_node or drop device_ids")
        if len(set(ids)) != len(ids):  # ids are normalised by rules.device_id: '00' and '0' are one GPU
            raise ck.fail(("device_ids",), "lists a GPU twice", "list each GPU once")
        sharing = spec.nodes_per_host
        if sharing * gpus > len(ids):
            raise ck.fail(("gpus_per_node",),
                          f"{sharing} node(s) x {gpus} GPUs need {sharing * gpus} GPUs "
                          f"but device_ids lists {len(ids)}",
                          "lower gpus_per_node or nodes, or list more device_ids")
    hosts = spec.hosts
    if hosts:
        if len(hosts) != nodes:
            raise ck.fail(("hosts",), f"lists {len(hosts)} host(s) but nodes is {nodes}",
                          "give one host per node (or drop hosts for a single-host run)")
        if len({h.lower() for h in hosts}) != len(hosts):
            raise ck.fail(("hosts",), "lists a host twice", "give one distinct host per node")
        if len(hosts) > 1 and spec.network != "host":
            raise ck.fail(("network",), "must be host for a multi-host run (bridge networks do not span hosts)",
                          "set network: host")
    if spec.docker_hosts:
        if len(spec.docker_hosts) != nodes:
            raise ck.fail(("docker_hosts",), f"lists {len(spec.docker_hosts)} Docker host(s) but nodes is {nodes}",
                          "give one Docker host per node, node 0's first")
        if len(set(spec.docker_hosts)) != len(spec.docker_hosts):
            raise ck.fail(("docker_hosts",), "lists a Docker host twice", "give one distinct Docker host per node")
        if nodes > 1 and spec.network != "host":
            raise ck.fail(("network",), "must be host for nodes on several Docker hosts (bridge networks do not "
                          "span hosts)", "set network: host (the default with docker_hosts)")
    targets = [v.target for v in spec.volumes]
    if spec.workdir:
        targets.append("/workspace")
    seen: set[str] = set()
    for t in targets:
        if t in seen:
            what = " (the workdir is mounted there)" if t == "/workspace" and spec.workdir else ""
            raise ck.fail(("volumes",), f"mounts two sources onto {t}{what}", "give every volume its own target")
        seen.add(t)


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    """A plain mapping that :func:`spec_from_dict` turns back into an equal spec (for `--dry-run`)."""
    out: dict[str, Any] = {}
    default = JobSpec()
    for f in dataclasses.fields(JobSpec):
        if f.name in INTERNAL_FIELDS:
            continue
        value = getattr(spec, f.name)
        if value == getattr(default, f.name):
            continue
        entry = FIELDS[f.name]
        out[f.name] = entry.dump(value) if entry.dump else (list(value) if isinstance(value, tuple) else value)
    return out
