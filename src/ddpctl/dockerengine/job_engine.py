"""The Engine a job runs on: DOCKER_HOST's engine, or the Docker hosts a user named (``--docker-hosts``) as one.

The one entry of the CLI into this package (``tests/unit/test_import_layers.py`` checks it): :func:`for_hosts`
for ``ps`` / ``logs`` / ``down`` / ``status``, which find a job's containers on every named host by label;
:func:`for_spec` for ``up``, which puts node *i* on host *i* and takes the addresses the nodes reach each other at
from the hosts' URLs when the spec gives none. Nothing connects here: each host answers on first use.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence

from ddpctl import rules
from ddpctl.dockerengine.docker_engine import DockerEngine
from ddpctl.dockerengine.host_address import split_hosts
from ddpctl.dockerengine.hosts_engine import connect_hosts
from ddpctl.errors import UsageError
from ddpctl.local.engine_interface import Engine

if TYPE_CHECKING:
    from ddpctl.spec import JobSpec


DOCKER_HOSTS_ENV = "DDPCTL_DOCKER_HOSTS"  # the Docker hosts of up / ps / logs / down when --docker-hosts names none


def for_hosts(given: str | Sequence[str] | None) -> Engine:
    """The Docker hosts ``given`` (URLs or context names, comma-separated or a list) as one engine; DOCKER_HOST's
    engine when it names none. A bad or repeated host is a usage error, before anything connects."""
    hosts = split_hosts(given)
    return connect_hosts(hosts) if hosts else DockerEngine()


def for_spec(spec: JobSpec) -> tuple[JobSpec, Engine]:
    """(spec, engine) for ``up``: with ``docker_hosts``, those hosts as one engine and the spec with ``hosts``
    filled in from the hosts' URLs when it gives none (node 0's address is the master); else (spec, DOCKER_HOST's
    engine)."""
    if not spec.docker_hosts:
        return spec, DockerEngine()
    engine = connect_hosts(spec.docker_hosts)
    if spec.nodes > 1 and not spec.hosts and not spec.master_addr:
        local = [h.name for h in engine.hosts if h.address is None]
        if local:
            raise UsageError(f"Docker host {local[0]} is a socket on this machine, so the address its node is "
                             "reached at by the other nodes is unknown",
                             "give every node's address with --hosts ADDR,ADDR (node 0's first), or use "
                             "tcp:// or ssh:// URLs")
        for h in engine.hosts:  # ssh's HostName for an alias is an address too: the --hosts rule applies
            try:
                rules.host_name(h.address)
            except rules.RuleError as exc:
                raise UsageError(f"Docker host {h.name} is reached at {exc.problem}",
                                 "give every node's address with --hosts ADDR,ADDR (node 0's first)") from None
        spec = dataclasses.replace(spec, hosts=tuple(h.address for h in engine.hosts))
    return spec, engine
