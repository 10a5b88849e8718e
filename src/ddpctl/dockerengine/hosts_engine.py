"""Several Docker hosts seen as one :class:`~ddpctl.local.engine_interface.Engine` (``ddpctl up --docker-hosts``).

The executor is written against one engine; this adapter lets the same code create, attach to, list and remove
a job whose nodes run on different hosts:

- a new container goes to its node's host (the ``ddpctl.node-rank`` label of the request; node *i* on host *i*);
- every call about a container (start, logs, wait, stop, remove, inspect) goes to the host it was created on or
  listed from (container ids are random 256-bit values, unique across hosts);
- listings (``containers``, ``networks``) are the union over all hosts, each entry naming its host.

So the executor's rules hold across hosts unchanged: creation is all-or-nothing (a failure on host 2 rolls back
what was created on host 1), and ``ps`` / ``logs`` / ``down`` find a job's containers on every host by label.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Sequence

from ddpctl.dockerengine.docker_engine import DockerEngine
from ddpctl.dockerengine.host_address import resolve_all
from ddpctl.errors import EngineError
from ddpctl.launch import LABEL_NODE_RANK
from ddpctl.local.engine_interface import ContainerInfo, Engine, NetworkInfo, VolumeInfo


@dataclasses.dataclass(frozen=True)
class NamedEngine:
    name: str  # the host as the user gave it
    engine: Engine
    address: str | None = None  # the machine's address from its URL (tcp://, ssh://); None for a local socket


class HostsEngine(Engine):
    node_per_host = True

    def __init__(self, hosts: Sequence[NamedEngine]) -> None:
        if not hosts:
            raise ValueError("HostsEngine needs at least one host")
        self.hosts = tuple(hosts)
        self.name = ",".join(h.name for h in self.hosts)
        self._where: dict[str, NamedEngine] = {}

    # ------------------------------------------------------------------------------------------ routing

    def host_of_node(self, rank: int) -> NamedEngine:
        """Node ``rank`` runs on host ``rank`` (one node per host)."""
        if not 0 <= rank < len(self.hosts):
            raise EngineError(f"node {rank} has no Docker host (only {len(self.hosts)} given)",
                              "give one Docker host per node")
        return self.hosts[rank]

    def _host(self, cid: str) -> NamedEngine:
        found = self._where.get(cid)
        if found is not None:
            return found
        for h in self.hosts:
            if h.engine.inspect(cid) is not None:
                self._where[cid] = h
                return h
        return self.hosts[0]  # not on any host (removed): that engine's own NotFound handling applies

    def _tag(self, h: NamedEngine, info: ContainerInfo) -> ContainerInfo:
        self._where[info.id] = h
        return dataclasses.replace(info, host=h.name)

    # ------------------------------------------------------------------------------------- the interface

    def ping(self) -> None:
        for h in self.hosts:
            h.engine.ping()

    def endpoint(self, cid: str) -> str:
        return self._host(cid).name

    def endpoints(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts)

    def check(self, endpoint: str | None = None, timeout: float = 5.0, *, fresh: bool = False) -> None:
        for h in self.hosts:
            if endpoint is None or h.name == endpoint:
                h.engine.check(None, timeout, fresh=fresh)

    def events(self, endpoint: str, label: str):
        for h in self.hosts:
            if h.name == endpoint:
                return h.engine.events(endpoint, label)
        raise NotImplementedError

    def only(self, endpoints: tuple[str, ...]) -> "HostsEngine":
        kept = HostsEngine([h for h in self.hosts if h.name in endpoints] or list(self.hosts[:1]))
        kept._where = {cid: h for cid, h in self._where.items() if h.name in endpoints}
        return kept

    def image_exists(self, ref: str) -> bool:
        return all(h.engine.image_exists(ref) for h in self.hosts)

    def has_nvidia_runtime(self, image: str | None = None) -> bool:
        return all(h.engine.has_nvidia_runtime(image) for h in self.hosts)

    def pull_image(self, ref: str) -> None:
        for h in self.hosts:
            h.engine.pull_image(ref)

    def create_network(self, name: str, labels: dict[str, str]) -> str:
        if len(self.hosts) == 1:
            return self.hosts[0].engine.create_network(name, labels)
        raise EngineError(f"network {name}: a bridge network does not span Docker hosts",
                          "use network: host (the default with docker_hosts)")

    def remove_network(self, id_or_name: str) -> None:
        for h in self.hosts:
            h.engine.remove_network(id_or_name)

    def networks(self, label: str | None = None, name: str | None = None) -> list[NetworkInfo]:
        return [n for h in self.hosts for n in h.engine.networks(label=label, name=name)]

    def create_volume(self, name: str, labels: dict[str, str]) -> str:
        """The volume on every host (each node mounts its own host's copy); all or none."""
        made: list[NamedEngine] = []
        try:
            for h in self.hosts:
                h.engine.create_volume(name, labels)
                made.append(h)
        except BaseException:
            for h in made:
                try:
                    h.engine.remove_volume(name)
                except Exception:  # noqa: BLE001 - the first error matters more
                    pass
            raise
        return name

    def remove_volume(self, name: str) -> None:
        for h in self.hosts:
            if h.engine.volumes(name=name):
                h.engine.remove_volume(name)

    def volumes(self, label: str | None = None, name: str | None = None) -> list[VolumeInfo]:
        return [v for h in self.hosts for v in h.engine.volumes(label=label, name=name)]

    def chown_volume(self, name: str, image: str, owner: str, target: str) -> None:
        for h in self.hosts:
            h.engine.chown_volume(name, image, owner, target)

    def create_container(self, request: dict[str, Any]) -> str:
        rank = str((request.get("labels") or {}).get(LABEL_NODE_RANK, "0"))
        h = self.host_of_node(int(rank) if rank.isdigit() else 0)
        cid = h.engine.create_container(request)
        self._where[cid] = h
        return cid

    def start(self, cid: str) -> None:
        self._host(cid).engine.start(cid)

    def containers(self, label: str | None = None, name: str | None = None) -> list[ContainerInfo]:
        out = [self._tag(h, c) for h in self.hosts for c in h.engine.containers(label=label, name=name)]
        return sorted(out, key=lambda i: (i.labels.get("ddpctl.job", ""), i.name, i.host))

    def inspect(self, cid: str) -> ContainerInfo | None:
        h = self._host(cid)
        info = h.engine.inspect(cid)
        return None if info is None else dataclasses.replace(info, host=h.name)

    def logs(self, cid: str, *, follow: bool = False, tail: int | None = None, since: float | None = None,
             timestamps: bool = False) -> Iterator[bytes]:
        return self._host(cid).engine.logs(cid, follow=follow, tail=tail, since=since, timestamps=timestamps)

    def get_archive(self, cid: str, path: str) -> Iterator[bytes]:
        return self._host(cid).engine.get_archive(cid, path)

    def wait(self, cid: str) -> int:
        return self._host(cid).engine.wait(cid)

    def stop(self, cid: str, timeout: int = 5) -> None:
        self._host(cid).engine.stop(cid, timeout)

    def remove_container(self, cid: str) -> None:
        self._host(cid).engine.remove_container(cid)


def connect_hosts(given: Sequence[str]) -> HostsEngine:
    """A HostsEngine over the Docker hosts ``given`` (URLs or context names), each connected on first use.

    Bad URLs and unknown contexts are usage errors here, before anything connects."""
    return HostsEngine([NamedEngine(h.given, DockerEngine(host=h), h.node_address()) for h in resolve_all(given)])
