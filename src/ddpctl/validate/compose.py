"""Compose-file rules beyond the Compose spec's JSON schema: what docker-compose 1.29.2 or the Docker Engine
rejects when the file is loaded or started.

- docker-compose 1.29.2 (the client the project supports besides Compose v2) rejects a top-level ``name:`` and
  the service-level ``gpus:`` key (use ``deploy.resources.reservations.devices``).
- References: ``depends_on`` names a service of the file; ``networks`` of a service are declared at the top
  level (or ``default``); a short-syntax volume whose source is a name (``data:/data``) is a declared named
  volume, and a relative bind source starts with ``./`` or ``../`` (``data/x:/x`` would be read as a volume
  name); no two mounts of a service on one target; ``network_mode`` is not combined with ``networks``, nor
  ``network_mode: host`` with ``hostname``.
- Values: container names as Docker accepts them and unique; environment names non-empty without ``=``;
  ``cpus`` positive; sizes (``shm_size``, ``mem_limit``...) that Docker can read; a GPU device request has
  ``count`` or ``device_ids``, not both.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from ddpctl.validate.pods import as_dict
from ddpctl.validate.schema import Issue, short

CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
# docker-py's parse_bytes, which docker-compose 1.29.2 uses: a number, an optional b/k/m/g, an optional 'b' after
# a unit letter (a grammar of the consumer, not the spec's size rule, which also reads Ki/Gi and t).
DOCKER_SIZE = re.compile(r"^\d+(\.\d+)?([kmgKMG][bB]?|[bB])?$")


def _names(value: Any) -> list[str]:
    """A list-or-dict field's names (``depends_on``, ``networks``)."""
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _short_volume(spec: str) -> tuple[str | None, str]:
    """(source or None, target) of ``[SOURCE:]TARGET[:MODE]``."""
    parts = spec.split(":")
    if len(parts) == 1:
        return None, parts[0]
    return parts[0], parts[1]


_MODE_GROUPS = ({"rw", "ro"}, {"z", "Z"}, {"shared", "rshared", "slave", "rslave", "private", "rprivate"},
                {"delegated", "cached", "consistent"}, {"nocopy"})


def _short_volume_problem(spec: str, named: bool) -> str | None:
    """What docker-compose 1.29.2 (``external:internal[:mode]``) or the Docker Engine (the mode words, an empty
    source, ``/`` as the target) refuses at ``up`` in a short-syntax volume, though its ``config`` passes it."""
    parts = spec.split(":")
    if len(parts) > 3:
        return "has more than SOURCE:TARGET:MODE (docker-compose: incorrect format)"
    if len(parts) >= 2 and parts[0] == "":
        return "has an empty source (the engine: invalid volume specification)"
    target = parts[1] if len(parts) >= 2 else parts[0]
    if target.rstrip("/") == "" and target:
        return "mounts onto / (the engine: the destination can't be '/')"
    if len(parts) == 3 and parts[2]:
        words = parts[2].split(",")
        for w in words:
            if not any(w in g for g in _MODE_GROUPS):
                return f"has mode {w!r}, which the engine does not know (rw, ro, z, Z, shared, slave, private ...)"
            if w == "nocopy" and not named:
                return "has mode 'nocopy', which applies to named volumes only (the engine refuses it on a bind mount)"
        for g in _MODE_GROUPS:
            if len([w for w in words if w in g]) > 1:
                return f"has mode {parts[2]!r}, which gives {'/'.join(sorted(g & set(words)))} together"
    return None


def check(doc: dict) -> Iterator[Issue]:
    if "name" in doc:
        yield Issue(("name",), "docker-compose 1.29.2 rejects a top-level name (Compose v2 accepts it); remove it "
                               "and use 'docker-compose -p NAME'")
    services = as_dict(doc.get("services"))
    declared_networks = set(as_dict(doc.get("networks"))) | {"default"}
    declared_volumes = set(as_dict(doc.get("volumes")))
    containers: dict[str, str] = {}
    for sname, svc in services.items():
        if not isinstance(svc, dict):
            continue
        p = ("services", sname)
        if "gpus" in svc:
            yield Issue(p + ("gpus",), "docker-compose 1.29.2 rejects the gpus key; request GPUs with "
                                      "deploy.resources.reservations.devices (driver: nvidia)")
        for dep in _names(svc.get("depends_on")):
            if dep not in services:
                yield Issue(p + ("depends_on",), f"names {dep!r}, which is not a service of this file")
        nets = _names(svc.get("networks"))
        for net in nets:
            if net not in declared_networks:
                yield Issue(p + ("networks",), f"network {net!r} is not declared under the top-level networks")
        mode = svc.get("network_mode")
        if mode is not None and nets:
            yield Issue(p + ("network_mode",), "cannot be combined with networks")
        if mode == "host" and "hostname" in svc:
            yield Issue(p + ("hostname",), "the Docker Engine refuses a hostname with network_mode: host")
        cname = svc.get("container_name")
        if isinstance(cname, str):
            if not CONTAINER_NAME.match(cname):
                yield Issue(p + ("container_name",), f"{cname!r} is not a valid container name "
                                                     "([a-zA-Z0-9][a-zA-Z0-9_.-]+)")
            elif cname in containers:
                yield Issue(p + ("container_name",), f"{cname!r} is also the container name of service "
                                                     f"{containers[cname]!r}")
            containers.setdefault(cname, sname)
        env = svc.get("environment")
        keys = [str(k) for k in env] if isinstance(env, dict) else [str(e).split("=", 1)[0] for e in env] \
            if isinstance(env, list) else []
        for i, key in enumerate(keys):
            if not key or "=" in key or "\x00" in key:
                where = p + ("environment", key if isinstance(env, dict) else i)
                yield Issue(where, f"{key!r} is not a valid environment variable name")
        cpus = svc.get("cpus")
        try:
            if cpus is not None and float(cpus) <= 0:
                yield Issue(p + ("cpus",), f"must be greater than 0, got {short(cpus)}")
        except (TypeError, ValueError):
            yield Issue(p + ("cpus",), f"{short(cpus)} is not a number")
        for key in ("shm_size", "mem_limit", "mem_reservation", "memswap_limit"):
            size = svc.get(key)
            if isinstance(size, str) and not (key == "memswap_limit" and size == "-1") \
                    and not DOCKER_SIZE.match(size):
                yield Issue(p + (key,), f"{short(size)} is not a size docker-compose reads (a number with b, k, m "
                                        "or g, such as 16g or 512m; no Ki/Gi)")
        targets: set[str] = set()
        volumes = svc.get("volumes")
        for i, vol in enumerate(volumes if isinstance(volumes, list) else []):
            vp = p + ("volumes", i)
            if isinstance(vol, str):
                source, target = _short_volume(vol)
                named = bool(source) and not source.startswith(("/", ".", "~", "$"))
                problem = _short_volume_problem(vol, named)
                if problem:
                    yield Issue(vp, f"{short(vol)} {problem}")
                    continue
                if source is not None and source and not source.startswith(("/", ".", "~", "$")):
                    if "/" in source:
                        yield Issue(vp, f"source {source!r} is read as a volume name; write ./{source} for a "
                                        "path relative to the compose file")
                    elif source not in declared_volumes:
                        yield Issue(vp, f"named volume {source!r} is not declared under the top-level volumes "
                                        f"(for a directory write ./{source})")
            elif isinstance(vol, dict):
                target = vol.get("target")
                if vol.get("type") == "volume" and isinstance(vol.get("source"), str) \
                        and vol["source"] not in declared_volumes:
                    yield Issue(vp + ("source",), f"named volume {vol['source']!r} is not declared under the "
                                                  "top-level volumes")
            else:
                continue
            if isinstance(target, str):
                if not target.startswith("/"):
                    yield Issue(vp, f"target {target!r} is not an absolute path in the container")
                elif target in targets:
                    yield Issue(vp, f"{target} is mounted twice in this service")
                targets.add(target)
        devices = as_dict(as_dict(as_dict(as_dict(svc.get("deploy")).get("resources")).get("reservations"))).get("devices")
        for i, dev in enumerate(devices if isinstance(devices, list) else []):
            if isinstance(dev, dict) and "count" in dev and "device_ids" in dev:
                yield Issue(p + ("deploy", "resources", "reservations", "devices", i),
                            "count and device_ids are mutually exclusive")
