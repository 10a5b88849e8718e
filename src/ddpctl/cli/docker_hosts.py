"""The ``--docker-hosts`` option of ``up`` / ``ps`` / ``logs`` / ``down`` and its default ``$DDPCTL_DOCKER_HOSTS``.

``up`` puts node *i* on host *i* with host networking, and the other commands find a job's containers on every
host by its labels; the engine for either comes from :mod:`ddpctl.dockerengine.job_engine`.
"""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

ENV = "DDPCTL_DOCKER_HOSTS"

DockerHostsOpt = Annotated[Optional[str], typer.Option(
    "--docker-hosts", help="Comma-separated Docker hosts (URLs or context names) to look on, as given to 'up "
    "--docker-hosts'. Default: $DDPCTL_DOCKER_HOSTS, else DOCKER_HOST's engine.", show_default=False)]


def engine_for(flag: str | None):
    """The engine of ``ps`` / ``logs`` / ``down``: the hosts of ``--docker-hosts`` (default
    ``$DDPCTL_DOCKER_HOSTS``) as one, else DOCKER_HOST's engine."""
    from ddpctl.dockerengine import job_engine

    return job_engine.for_hosts(flag if flag is not None else os.environ.get(ENV))


def up_spec(kw: dict):
    """``up``'s spec from its flags and file; ``$DDPCTL_DOCKER_HOSTS`` when neither names Docker hosts."""
    from ddpctl.cli import spec_options as so

    env = os.environ.get(ENV, "").strip()
    spec = so.spec_from_cli("up", dict(kw) if env else kw)
    if env and not spec.docker_hosts:
        spec = so.spec_from_cli("up", {**kw, "docker_hosts": env})
    return spec
