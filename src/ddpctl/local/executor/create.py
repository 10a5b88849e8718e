"""Create and start a job's containers (all or nothing), and remove a job by label.

The one place where a job's network and containers are created on an engine and started: ``up`` is
preflight -> replace a finished run -> :func:`create` -> :func:`start`. A failure (or Ctrl-C) halfway
removes what was created (:func:`rollback`).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ddpctl.errors import EngineError
from ddpctl.launch import job_label
from ddpctl.local.engine_interface import Engine
from ddpctl.local.executor.common import Say, exc_reason, say_nothing
from ddpctl.local.executor.preflight import port_free, preflight, secret_values
from ddpctl.local.plan import LocalPlan, container_request, is_root


@dataclass
class Job:
    plan: LocalPlan
    ids: dict[int, str]  # rank -> container id
    network_id: str | None
    volume: str | None = None  # the checkpoint volume ddpctl created for the job
    restarts: int = 0  # how many times the job was restarted (ddpctl.local.restarts)
    step: int | None = None  # the highest training step its output named, over every attempt
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)


def remove_job(engine: Engine, job: str, *, network: str | None = None,
               keep_volumes: bool = False) -> tuple[int, int, int]:
    """Remove every container, network and volume labelled ``job`` (``keep_volumes``: not its checkpoint
    volume, for ``up --resume``). Idempotent.

    Returns (containers, networks, volumes). The containers' output is kept first
    (ddpctl.joboutput.kept_output); when that fails nothing is removed: :class:`~ddpctl.joboutput.kept_output.KeepFailed`
    says why in one line."""
    from ddpctl.joboutput import kept_output

    kept_output.keep_or_fail(engine, job, removing=True)
    n_c = n_n = n_v = 0
    for attempt in range(3):  # an attached `up` may be restarting the job meanwhile: remove what it made, again
        for c in engine.containers(label=job_label(job)):
            engine.remove_container(c.id)
            n_c += 1
        try:
            for net in engine.networks(label=job_label(job)):
                engine.remove_network(net.id)
                n_n += 1
            for vol in [] if keep_volumes else engine.volumes(label=job_label(job)):
                engine.remove_volume(vol.name)
                n_v += 1
            return n_c, n_n, n_v
        except Exception as exc:  # noqa: BLE001 - in use by a container created meanwhile
            if attempt == 2:
                raise EngineError(f"could not remove job {job}: {exc_reason(exc)}",
                                  f"stop its 'ddpctl up' (Ctrl-C), then run '{shlex.join(['ddpctl', 'down', job])}' again") from None
    return n_c, n_n, n_v


def create(plan: LocalPlan, engine: Engine, *, say: Say = say_nothing,
           secrets: Mapping[str, str] | None = None, resume: bool = False) -> Job:
    """Create the network and every container, or nothing at all. ``resume``: the checkpoint volume may hold
    an earlier run's checkpoints (it is kept, also on a failure) and the nodes start as on a restart."""
    if secrets is None:
        secrets = secret_values(plan, os.environ)
    ids: dict[int, str] = {}
    network_id = volume = None
    try:
        if plan.network:
            network_id = engine.create_network(plan.network, dict(plan.network_labels))
        if plan.checkpoint_volume:
            volume = engine.create_volume(plan.checkpoint_volume, dict(plan.network_labels))
            user = plan.containers[0].user if plan.containers else None
            if not is_root(user):  # a new volume is root's: the containers' user must write its checkpoints
                engine.chown_volume(volume, plan.image, user or "", "/checkpoints")
        if resume:
            volume = None  # not ours to remove: it holds the checkpoints the job resumes from
        for c in plan.containers:
            ids[c.rank] = engine.create_container(container_request(c, secrets, restart=1 if resume else 0))
        return Job(plan, ids, network_id, volume, secrets=dict(secrets))
    except BaseException as exc:
        rollback(engine, list(ids.values()), network_id, volume)
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, EngineError):
            raise
        raise EngineError(f"creating job {plan.job} failed ({exc_reason(exc)}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def start(job: Job, engine: Engine) -> None:
    """Start every node (node 0 first); a failure stops and removes the whole job."""
    try:
        for rank in sorted(job.ids):
            engine.start(job.ids[rank])
    except BaseException as exc:
        rollback(engine, list(job.ids.values()), job.network_id, job.volume)
        if isinstance(exc, KeyboardInterrupt):
            raise
        reason = exc_reason(exc)
        launcher = job.plan.containers[0].argv[0] if job.plan.containers else ""
        if "executable file not found" in reason and launcher and launcher in reason:
            raise EngineError(f"image {job.plan.image} has no '{launcher}' (the ddp-train package's torchrun "
                              "wrapper every node starts with); nothing was left behind",
                              f"build on it with '{shlex.join(['ddpctl', 'image', 'build', '--base', job.plan.image])} --tag ...', or "
                              "'pip install' this project in it") from None
        raise EngineError(f"starting job {job.plan.job} failed ({reason}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def rollback(engine: Engine, cids: list[str], network_id: str | None, volume: str | None = None) -> None:
    for cid in cids:
        try:
            engine.remove_container(cid)
        except Exception as exc:  # noqa: BLE001 - keep removing the rest; say what stayed
            print(f"warning: could not remove container {cid[:12]}: {exc_reason(exc)}", file=sys.stderr)
    if network_id:
        try:
            engine.remove_network(network_id)
        except Exception as exc:  # noqa: BLE001
            print(f"warning: could not remove network {network_id[:12]}: {exc_reason(exc)}", file=sys.stderr)
    if volume:
        try:
            engine.remove_volume(volume)
        except Exception as exc:  # noqa: BLE001
            print(f"warning: could not remove volume {volume}: {exc_reason(exc)}", file=sys.stderr)


def restart(job: Job, engine: Engine) -> None:
    """Restart every node of a stopped job: its containers are recreated (restart argv, restart count) and
    started; the network and the checkpoint volume stay. A failure raises :class:`EngineError` (the caller
    removes the job)."""
    from ddpctl.joboutput import kept_output

    kept_output.keep(engine, job.plan.job)  # this attempt's output outlives its containers
    for cid in job.ids.values():
        engine.remove_container(cid)
    job.ids = {}
    job.restarts += 1
    try:
        for c in job.plan.containers:
            job.ids[c.rank] = engine.create_container(container_request(c, job.secrets, restart=job.restarts))
        for rank in sorted(job.ids):
            engine.start(job.ids[rank])
    except Exception as exc:  # noqa: BLE001 - KeyboardInterrupt passes: the caller removes the job
        if isinstance(exc, EngineError):
            raise
        raise EngineError(f"restarting job {job.plan.job} failed ({exc_reason(exc)})",
                          "fix the cause above and run 'ddpctl up' again") from None


def check_resume(max_restarts: int, job: str) -> None:
    """``up --resume`` needs checkpoints to resume from: ``--max-restarts`` (a checkpoint directory)."""
    if not max_restarts:
        from ddpctl.errors import UsageError

        raise UsageError(f"--resume continues job {job} from its checkpoints, which only a job with "
                         "--max-restarts keeps (in /checkpoints)", "add --max-restarts N, or drop --resume")


def check_checkpoints(plan: LocalPlan, engine: Engine) -> None:
    """``up --resume``: the job's checkpoint volume must exist (an earlier run made it); a job that never ran, or
    whose checkpoints went with ``down``, has nothing to resume from: refused, rather than trained from step 0."""
    if not plan.checkpoint_volume or engine.volumes(name=plan.checkpoint_volume):
        return
    from ddpctl.errors import UsageError

    raise UsageError(f"--resume: job {plan.job} has no checkpoint volume ({plan.checkpoint_volume}) to resume from: "
                     "it never ran on this engine, or 'ddpctl down' removed its checkpoints",
                     "drop --resume to start it from step 0")


def up(plan: LocalPlan, engine: Engine, *, host_gpus: int, say: Say = say_nothing,
       port_check: Callable[[int], bool] = port_free, environ: Mapping[str, str] | None = None,
       resume: bool = False) -> Job:
    """Preflight, replace a finished run of the same name, create all, start all.

    Secret references take their values from ``environ`` (default: this process's environment), read here,
    when the job starts: never in the plan or a dry run. ``resume``: keep the finished run's checkpoint volume
    and start every node as on a restart (ddp-train ``--resume auto``)."""
    if resume:
        check_resume(plan.max_restarts, plan.job)
        check_checkpoints(plan, engine)
    secrets = secret_values(plan, os.environ if environ is None else environ)
    previous = preflight(plan, engine, host_gpus=host_gpus, port_check=port_check)
    if previous:
        say(f"removing the finished earlier run of job {plan.job}" + (" (its checkpoints stay)" if resume else ""))
        remove_job(engine, plan.job, keep_volumes=resume)
    elif plan.network or plan.checkpoint_volume:
        remove_job(engine, plan.job, keep_volumes=resume)  # a network or a checkpoint volume left without containers
    job = create(plan, engine, say=say, secrets=secrets, resume=resume)
    start(job, engine)
    return job

