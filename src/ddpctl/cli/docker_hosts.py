"""The ``--docker-hosts`` option of ``up`` / ``ps`` / ``logs`` / ``down`` and its default ``$DDPCTL_DOCKER_HOSTS``.

``up`` puts node *i* on host *i* with host networking, and the other commands find a job's containers on every
host by its labels; the engine for either comes from :mod:`ddpctl.dockerengine.job_engine` (for ``ps`` / ``logs`` /
``down`` / ``status`` through :func:`ddpctl.api.jobs.engine_for`).
"""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

DockerHostsOpt = Annotated[Optional[str], typer.Option(
    "--docker-hosts", help="Comma-separated Docker hosts (URLs or context names) to look on, as given to 'up "
    "--docker-hosts'. Default: $DDPCTL_DOCKER_HOSTS, else DOCKER_HOST's engine.", show_default=False)]


def up_spec(kw: dict):
    """``up``'s spec from its flags and file; ``$DDPCTL_DOCKER_HOSTS`` when neither names Docker hosts."""
    from ddpctl.cli import spec_options as so
    from ddpctl.dockerengine.job_engine import DOCKER_HOSTS_ENV

    env = os.environ.get(DOCKER_HOSTS_ENV, "").strip()
    spec = so.spec_from_cli("up", dict(kw) if env else kw)
    if env and not spec.docker_hosts:
        spec = so.spec_from_cli("up", {**kw, "docker_hosts": env})
    return spec
