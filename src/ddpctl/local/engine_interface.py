"""The container engine seen by the executor: a small interface (here); its Docker SDK adapters are
:class:`ddpctl.dockerengine.docker_engine.DockerEngine` and :class:`ddpctl.dockerengine.hosts_engine.HostsEngine`
(several hosts), which import this module, never the other way round.

The executor only calls these methods, so the rules about what is created and removed live in one
place (the executor package) and the Docker specifics in another (:mod:`ddpctl.dockerengine`, whose
:func:`~ddpctl.dockerengine.connect` makes every client, also the image commands'). The executor never imports
:mod:`ddpctl.dockerengine`: an engine over several Docker hosts is an Engine like any other, which says so with
:attr:`Engine.node_per_host` and shows each host as ``engine.only((host,))``. ``docker`` is imported lazily.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    state: str = "unknown"  # created | running | exited | dead | ...
    exit_code: int | None = None
    created: float = 0.0  # epoch seconds
    oom_killed: bool = False
    command: tuple[str, ...] = ()  # the container's argv (entrypoint + cmd)
    host: str = ""  # the Docker host it runs on, as the user named it (several hosts only)
    mounts: tuple[tuple[str, str, str], ...] = ()  # (type "bind"|"volume", host path or volume name, target)

    @property
    def running(self) -> bool:
        return self.state in ("running", "restarting", "paused")


@dataclass(frozen=True)
class NetworkInfo:
    id: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class VolumeInfo:
    name: str
    labels: dict[str, str] = field(default_factory=dict)


class Engine(abc.ABC):
    """What ddpctl needs from a container engine."""

    name = "the Docker Engine"  # how messages name it (a DockerEngine: its URL)
    # True for the Docker hosts a user named (``up --docker-hosts``): node i runs on endpoint i, none of them need
    # be this machine (its GPUs, CPUs, ports and paths say nothing about them), a host that lacks the image pulls it
    node_per_host = False

    def endpoint(self, cid: str) -> str:
        """The name of the engine that holds container ``cid`` (an engine over several hosts: that host's)."""
        return self.name

    def endpoints(self) -> tuple[str, ...]:
        """The names of the engines behind this one (one, unless it spans several Docker hosts)."""
        return (self.name,)

    def check(self, endpoint: str | None = None, timeout: float = 5.0, *, fresh: bool = False) -> None:
        """Raise unless the engine (or the one named ``endpoint``) answers a ping within ``timeout`` seconds.
        ``fresh``: on a new connection (a daemon shutting down still serves the connections it has)."""
        self.ping()

    def events(self, endpoint: str, label: str) -> Iterator[Any]:
        """The engine's event stream for objects labelled ``label`` (blocks; it breaks when the daemon goes
        away). An engine without one raises NotImplementedError."""
        raise NotImplementedError

    def only(self, endpoints: tuple[str, ...]) -> "Engine":
        """This engine limited to ``endpoints`` (those still answering, or one host to check on its own): itself,
        unless it spans several."""
        return self

    @abc.abstractmethod
    def ping(self) -> None: ...

    @abc.abstractmethod
    def image_exists(self, ref: str) -> bool: ...

    @abc.abstractmethod
    def has_nvidia_runtime(self, image: str | None = None) -> bool: ...

    @abc.abstractmethod
    def create_network(self, name: str, labels: dict[str, str]) -> str: ...

    @abc.abstractmethod
    def remove_network(self, id_or_name: str) -> None: ...

    @abc.abstractmethod
    def networks(self, label: str | None = None, name: str | None = None) -> list[NetworkInfo]: ...

    @abc.abstractmethod
    def create_volume(self, name: str, labels: dict[str, str]) -> str: ...

    @abc.abstractmethod
    def remove_volume(self, name: str) -> None: ...

    @abc.abstractmethod
    def volumes(self, label: str | None = None, name: str | None = None) -> list[VolumeInfo]: ...

    @abc.abstractmethod
    def chown_volume(self, name: str, image: str, owner: str, target: str) -> None:
        """Give the new volume ``name`` to ``owner`` (uid[:gid]), by a throwaway root container of ``image``."""

    @abc.abstractmethod
    def create_container(self, request: dict[str, Any]) -> str: ...

    @abc.abstractmethod
    def start(self, cid: str) -> None: ...

    @abc.abstractmethod
    def containers(self, label: str | None = None, name: str | None = None) -> list[ContainerInfo]: ...

    @abc.abstractmethod
    def inspect(self, cid: str) -> ContainerInfo | None: ...

    @abc.abstractmethod
    def logs(self, cid: str, *, follow: bool = False, tail: int | None = None, since: float | None = None,
             timestamps: bool = False) -> Iterator[bytes]:
        """The container's output as the engine streams it, in chunks of any size (never the whole log in one:
        readers bound what they keep, ddpctl.joboutput.reading); an iterator with ``close()`` is closed by a
        reader that stops early."""

    @abc.abstractmethod
    def wait(self, cid: str) -> int: ...

    @abc.abstractmethod
    def stop(self, cid: str, timeout: int = 5) -> None: ...

    @abc.abstractmethod
    def remove_container(self, cid: str) -> None: ...

    def get_archive(self, cid: str, path: str) -> Iterator[bytes]:
        """A tar stream of ``path`` in container ``cid`` (running or not; mounted volumes included)."""
        raise NotImplementedError

    def pull_image(self, ref: str) -> None:
        """Pull ``ref`` from its registry (an engine that cannot pull says so)."""
        from ddpctl.errors import EngineError

        raise EngineError(f"this engine cannot pull {ref}", "load the image onto it with 'docker load'")

