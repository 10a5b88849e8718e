"""``ddpctl up``'s steps, shared by ``ddpctl.up`` and the CLI: prepare (spec -> engine and plan; the workspace image
built when asked), start (all or nothing), and an attached run to its end."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ddpctl.api.job_outcome import Outcome
from ddpctl.errors import UsageError

if TYPE_CHECKING:
    from ddpctl.local.engine_interface import Engine
    from ddpctl.local.plan import LocalPlan
    from ddpctl.spec import JobSpec

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def caller_user() -> str | None:
    """uid:gid of whoever runs ddpctl: the containers' default user, so files they write are the caller's."""
    if not hasattr(os, "getuid"):
        return None
    return f"{os.getuid()}:{os.getgid()}"


# ---- up: prepare (spec -> plan), start (all or nothing), and an attached run to its end


@dataclass
class Prepared:
    """A job ready to start: its spec (with the baked image, the Docker hosts' addresses), engine and plan."""

    spec: JobSpec
    engine: Engine
    plan: LocalPlan
    several: bool  # node i on Docker host i


def prepare(spec: JobSpec, *, bake: bool = False, pip: Any = None, allow_credentials: bool = False,
            job_file: str | None = None, dry_run: bool = False, say: Say = _quiet) -> Prepared:
    """Build the workspace image when asked (``up --bake``), place the nodes on their engine(s) and plan the
    containers; nothing is created (with ``dry_run`` nothing is built either)."""
    from ddpctl.api import workspace_rules
    from ddpctl.dockerengine import job_engine
    from ddpctl.local import executor
    from ddpctl.local.plan import plan_local

    if workspace_rules.asked_to_build(spec, bake, flag="--bake", source=job_file):
        from ddpctl.images import bake as baking

        if dry_run:
            say(baking.plan_text(spec, "up", push=False, pip=pip, allow_credentials=allow_credentials).rstrip())
            spec = baking.with_image(spec, baking.planned_ref(spec, baking.scan(spec, allow_credentials=allow_credentials)))
        else:
            spec = baking.bake(spec, push=False, pip=pip, allow_credentials=allow_credentials)
    else:
        workspace_rules.refuse_unused(pip, spec.workspace.requirements, flag="--bake",
                                        allow_credentials=allow_credentials)
    spec, engine = job_engine.for_spec(spec)
    plan = plan_local(spec, cwd=Path.cwd(), default_user=caller_user(), host_cpus=executor.host_cpus(engine))
    return Prepared(spec, engine, plan, bool(engine.node_per_host))


@dataclass
class Launched:
    """A started job: what an attached run needs."""

    prepared: Prepared
    started: Any  # ddpctl.local.executor.Job
    seconds: float


def start(prepared: Prepared, *, detach: bool, resume: bool = False, say: Say = _quiet) -> Launched:
    """Create and start the job's network and containers (all or nothing); one line about it through ``say``."""
    from ddpctl.joboutput import tensorboard
    from ddpctl.local import executor, restarts

    plan, spec = prepared.plan, prepared.spec
    if detach and plan.max_restarts:
        raise UsageError(f"--max-restarts {plan.max_restarts} needs an attached 'ddpctl up': it is the process "
                         "that restarts the job, and -d returns at once",
                         "drop -d (keep it running with nohup or tmux), or use --max-restarts 0")
    started = executor.start_job(plan, prepared.engine, resume=resume, say=say)
    on = f" on {len(spec.docker_hosts)} Docker host(s)" if spec.docker_hosts else ""
    where = f"volume {plan.checkpoint_volume}" if plan.checkpoint_volume else "your mount"
    tb_dir = tensorboard.flag_value(plan.containers[0].argv)
    say(f"job {plan.job}: {len(started.job.ids)} node(s){on}, world size {plan.world_size}, image {plan.image}"
        + (f", up to {plan.max_restarts} restart(s), checkpoints in {restarts.CHECKPOINT_DIR} ({where})"
           if plan.max_restarts else "")
        + (", resuming from its checkpoints" if resume else "")
        + (f", TensorBoard event files in {tb_dir} ('ddpctl status {plan.job}' says where and how to look at them)"
           if tb_dir else "")
        + f" (started in {started.seconds:.1f}s)")
    note = restarts.checkpoint_cadence_note(plan.containers[0].argv) if plan.max_restarts else None
    if note:
        say(note)
    return Launched(prepared, started.job, started.seconds)


def run_attached(launched: Launched, *, rm: bool = False, color: bool = False, out: Any = None, say: Say = _quiet,
                 argv: list[str] | None = None, wait_s: float | None = None) -> Outcome:
    """Stream the job's output to ``out`` until it ends (restarting it after retryable failures with
    ``max_restarts``), keep its output, and say how it ended. Ctrl-C stops and removes it
    (:class:`ddpctl.local.executor.Stopped`)."""
    from ddpctl.local import executor

    plan, engine = launched.prepared.plan, launched.prepared.engine
    finished = executor.run_attached(launched.started, engine, rm=rm, color=color, out=out, say=say, argv=argv,
                                     wait_s=wait_s)
    if not rm:  # with --rm the removal has kept it already
        from ddpctl.joboutput import kept_output

        try:  # 'ddpctl logs/status' read it once the containers are gone
            kept = kept_output.keep_or_fail(engine, plan.job)
        except kept_output.KeepFailed as exc:
            say(exc.message)  # the containers stay, and with them the output
        else:
            if kept:
                say(f"job {plan.job}: output kept in {kept}")
    codes = dict(finished.outcome.codes)
    if finished.failure is not None:
        outcome = Outcome.of_failure(plan.job, finished.failure, codes, finished.outcome.summary)
    else:
        again = f" after {finished.restarts} restart(s)" if finished.restarts else ""
        import shlex

        outcome = Outcome(plan.job, 0, f"job {plan.job} finished{again}: all {len(launched.started.ids)} node(s) "
                          "exited 0", "" if rm else f"remove it with '{shlex.join(['ddpctl', 'down', plan.job])}'",
                          codes, finished.outcome.summary)
    return outcome


