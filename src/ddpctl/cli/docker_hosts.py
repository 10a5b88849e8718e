"""Which Docker engine(s) ``up`` / ``ps`` / ``logs`` / ``down`` talk to: DOCKER_HOST's, or several named hosts.

``--docker-hosts`` (default ``$DDPCTL_DOCKER_HOSTS``) names them; ``up`` puts node *i* on host *i* with host
networking, and the other commands find a job's containers on every host by its labels.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated, Optional

import typer

from ddpctl.errors import UsageError

ENV = "DDPCTL_DOCKER_HOSTS"

DockerHostsOpt = Annotated[Optional[str], typer.Option(
    "--docker-hosts", help="Comma-separated Docker hosts (URLs or context names) to look on, as given to 'up "
    "--docker-hosts'. Default: $DDPCTL_DOCKER_HOSTS, else DOCKER_HOST's engine.", show_default=False)]


def given_hosts(flag: str | None) -> tuple[str, ...]:
    from ddpctl.dockerengine import split_hosts

    return split_hosts(flag if flag is not None else os.environ.get(ENV))


def engine_for(flag: str | None):
    """The engine of ``ps`` / ``logs`` / ``down``: the named hosts as one, else DOCKER_HOST's engine."""
    hosts = given_hosts(flag)
    if hosts:
        from ddpctl.dockerengine.hosts_engine import connect_hosts

        return connect_hosts(hosts)
    from ddpctl.dockerengine.docker_engine import DockerEngine

    return DockerEngine()


def up_spec(kw: dict):
    """``up``'s spec from its flags and file; ``$DDPCTL_DOCKER_HOSTS`` when neither names Docker hosts."""
    from ddpctl.cli import spec_options as so

    env = os.environ.get(ENV, "").strip()
    spec = so.spec_from_cli("up", dict(kw) if env else kw)
    if env and not spec.docker_hosts:
        spec = so.spec_from_cli("up", {**kw, "docker_hosts": env})
    return spec


def place(spec):
    """(spec, engine) for ``up``: with docker_hosts, a HostsEngine and the spec with ``hosts`` filled in from the
    hosts' URLs when the spec gives none (node 0's address is the master); else (spec, DockerEngine())."""
    from ddpctl.dockerengine.docker_engine import DockerEngine

    if not spec.docker_hosts:
        return spec, DockerEngine()
    from ddpctl.dockerengine.hosts_engine import connect_hosts

    engine = connect_hosts(spec.docker_hosts)
    if spec.nodes > 1 and not spec.hosts and not spec.master_addr:
        local = [h.name for h in engine.hosts if h.address is None]
        if local:
            raise UsageError(f"Docker host {local[0]} is a socket on this machine, so the address its node is "
                             "reached at by the other nodes is unknown",
                             "give every node's address with --hosts ADDR,ADDR (node 0's first), or use "
                             "tcp:// or ssh:// URLs")
        from ddpctl import rules

        for h in engine.hosts:  # ssh's HostName for an alias is an address too: the --hosts rule applies
            try:
                rules.host_name(h.address)
            except rules.RuleError as exc:
                raise UsageError(f"Docker host {h.name} is reached at {exc.problem}",
                                 "give every node's address with --hosts ADDR,ADDR (node 0's first)") from None
        spec = dataclasses.replace(spec, hosts=tuple(h.address for h in engine.hosts))
    return spec, engine
