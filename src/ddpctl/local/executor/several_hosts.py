"""A job on several Docker hosts (``ddpctl up --docker-hosts``): preflight on every host, then the one create/start.

Before anything is created, every host must answer, no host may hold a running job of that name or a foreign
container with a node's name, every host must have the image (it is pulled on a host that lacks it; a failed
pull is one error naming the host and how to load the image there) and, for GPU jobs, an NVIDIA runtime. Then
:func:`~ddpctl.local.executor.create.create` and :func:`~ddpctl.local.executor.create.start` run against the one
engine that spans the hosts (an :class:`~ddpctl.local.engine_interface.Engine` with ``node_per_host``; each host
is ``engine.only((host,))``), so a failure on any host removes what was created on all of them.
"""

from __future__ import annotations

import os
import shlex
from typing import Mapping

from ddpctl.errors import EngineError, UsageError
from ddpctl.local.engine_interface import ContainerInfo, Engine
from ddpctl.local.executor.common import Say, exc_reason, say_nothing
from ddpctl.local.executor.create import Job, check_checkpoints, check_resume, create, remove_job, start
from ddpctl.local.executor.preflight import clashes, secret_values
from ddpctl.local.plan import LocalPlan


def docker_cli(host: str) -> str:
    """How the docker CLI addresses the Docker host ``host`` (as the user named it): ``docker -H URL`` or
    ``docker --context NAME``."""
    return shlex.join(["docker", "-H", host] if "://" in host else ["docker", "--context", host])


def ensure_image(host: Engine, image: str, say: Say = say_nothing) -> None:
    """The image on the Docker host ``host`` (one of a spanning engine's, named by ``host.name``), pulled there
    when missing; one error naming the host when that fails."""
    if host.image_exists(image):
        return
    say(f"image {image} is not on Docker host {host.name}: pulling it there")
    try:
        host.pull_image(image)
    except Exception as exc:  # noqa: BLE001 - any pull failure: no registry, no such image, auth
        raise UsageError(f"image {image} is not on Docker host {host.name} and pulling it there failed "
                         f"({exc_reason(exc)[:160]})",
                         f"load it there ('{shlex.join(['docker', 'save', image])} | {docker_cli(host.name)} load') or push it to a "
                         "registry that host can reach") from None
    if not host.image_exists(image):
        raise UsageError(f"image {image} is still not on Docker host {host.name} after a pull",
                         f"load it there ('{shlex.join(['docker', 'save', image])} | {docker_cli(host.name)} load')")


def preflight_hosts(plan: LocalPlan, engine: Engine, *, say: Say = say_nothing) -> list[ContainerInfo]:
    """Raise on anything that would make the job fail on any host; return a finished earlier run to replace."""
    hosts = [engine.only((name,)) for name in engine.endpoints()]
    if not plan.host_network and len(hosts) > 1:
        raise UsageError(f"job {plan.job} uses a bridge network, which does not span Docker hosts",
                         "use --network host (the default with --docker-hosts)")
    if plan.checkpoint_volume and len(hosts) > 1:
        if plan.max_restarts:
            raise UsageError(f"--max-restarts {plan.max_restarts} on several Docker hosts needs one checkpoint "
                             "directory all of them see (a volume per host would let the nodes resume from different "
                             "checkpoints)", "mount a shared directory at /checkpoints on every host "
                             "(-v /shared/ckpt:/checkpoints), or use --max-restarts 0")
        raise UsageError("--tensorboard on several Docker hosts needs one checkpoint directory all of them see (the "
                         "event files go to /checkpoints/tensorboard; a volume per host would split the job's files)",
                         "mount a shared directory at /checkpoints on every host (-v /shared/ckpt:/checkpoints), or "
                         "drop --tensorboard")
    for h in hosts:
        h.ping()
    existing = clashes(plan, engine)
    for h in hosts:
        ensure_image(h, plan.image, say)
    if plan.wants_gpus:
        for h in hosts:
            if not h.has_nvidia_runtime(plan.image):
                raise EngineError(f"Docker host {h.name} has no NVIDIA runtime, so its containers cannot get GPUs",
                                  "install nvidia-container-toolkit on that host and restart its dockerd")
    return existing


def up_hosts(plan: LocalPlan, engine: Engine, *, say: Say = say_nothing,
             environ: Mapping[str, str] | None = None, resume: bool = False) -> Job:
    """Preflight every host, replace a finished run of the same name, create all, start all (node 0 first)."""
    if resume:
        check_resume(plan.max_restarts, plan.job)
        check_checkpoints(plan, engine)
    secrets = secret_values(plan, os.environ if environ is None else environ)
    if preflight_hosts(plan, engine, say=say):
        say(f"removing the finished earlier run of job {plan.job}")
        remove_job(engine, plan.job, keep_volumes=resume)
    job = create(plan, engine, say=say, secrets=secrets, resume=resume)
    start(job, engine)
    return job
