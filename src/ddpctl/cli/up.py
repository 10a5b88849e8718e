"""``ddpctl up``: run a job, one container per node, on this host or on several Docker hosts (``ps``, ``logs``
and ``down`` are in :mod:`ddpctl.cli.cluster`)."""

from __future__ import annotations

import inspect
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from ddpctl.cli import spec_options as so
from ddpctl.cli import workspace_options
from ddpctl.cli.app import app, err


def _caller() -> str | None:
    """uid:gid of whoever runs ddpctl: the containers' default user, so files they write are the caller's."""
    if not hasattr(os, "getuid"):
        return None
    return f"{os.getuid()}:{os.getgid()}"


def stdout_color(stream) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


_UP_OPTIONS = [
    inspect.Parameter("detach", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--detach", "-d", help="Start the job and return.")]),
    inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--dry-run", help="Print the containers and network that would be created (YAML) "
                                             "and exit.")]),
    inspect.Parameter("rm", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--rm", help="Remove the job's containers when it ends (attached).")]),
    inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--resume", help="Continue a job that ended (e.g. when its Docker Engine went away) from "
                                            "its checkpoints: its checkpoint volume is kept and ddp-train gets "
                                            "'--resume auto' (needs --max-restarts).")]),
    inspect.Parameter("bake", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
        bool, typer.Option("--bake", help="Build the --workdir code (and --requirements) into a workspace image "
                                          "on the job image and run that, nothing mounted: what a cluster runs.")]),
    *workspace_options.workspace_params(),
]


def up(**kw) -> None:
    """Run a job on this host: one container per node on a private network, node 0 the master; or across
    machines: --docker-hosts URL,URL puts node i on Docker host i (host networking, node 0's address the master).

    Attached by default: every line prefixed with its node and global rank ('node-1 rank-3 | ...'), the
    first failure ends with one line naming its node, rank, exit code and last error line; Ctrl-C (or
    closing stdout, as '| head' does) stops the job and removes it. With -d it returns at once; use
    'ddpctl logs' / 'ddpctl ps' / 'ddpctl down'.

    With --max-restarts N (attached only) a node that dies with a retryable exit code (>= 128: killed,
    OOM-killed, lost peer) restarts the whole job, up to N times, each restart one line on stderr; every
    node mounts the job's checkpoint directory /checkpoints (a volume <job>-ckpt that 'down' removes, or
    your own '-v DIR:/checkpoints'), ddp-train writes its checkpoints there and resumes from the newest
    one ('--resume auto'). A permanent exit code (< 128) ends the job at once.

    A Docker Engine that goes away is waited for (DDPCTL_ENGINE_WAIT seconds, default 60), then treated as a
    node loss; exit 0 only when every node exited 0 and the program said it finished, 69 when an engine went
    away for good (the error line gives the command that resumes the job: 'up --resume ...').

    Examples:

      ddpctl up --nodes 2 --nproc-per-node 2

      ddpctl up --nodes 2 --max-restarts 3 -- ddp-train --checkpoint-every 50

      ddpctl up --nodes 2 --workdir . -- python my_train.py --epochs 1

      ddpctl up --nodes 2 --workdir . --bake --wheelhouse wheelhouse -- python my_train.py   (as a cluster runs it)

      ddpctl up -f job.yaml -d && ddpctl logs ddp --follow

      ddpctl up -n 2 --docker-hosts ssh://me@gpu1,ssh://me@gpu2 -d
    """
    from ddpctl.cli import docker_hosts as dh
    from ddpctl.dockerengine import job_engine
    from ddpctl.local.plan import plan_local

    detach, dry_run, rm, bake = kw.pop("detach"), kw.pop("dry_run"), kw.pop("rm"), kw.pop("bake")
    resume = kw.pop("resume")
    pip = workspace_options.pip_options(kw)
    allow_credentials = kw.pop("allow_credential_files", False)
    job_file = kw.get("file")
    workspace_options.absolute_code_paths(kw, bool(bake))
    spec = dh.up_spec(kw)
    from ddpctl.local import executor

    wait_s = executor.engine_wait_s()  # a bad DDPCTL_ENGINE_WAIT is refused before anything starts
    if resume:
        executor.check_resume(spec.max_restarts, spec.name)
    if workspace_options.asked_to_build(spec, bool(bake), flag="--bake", source=job_file):
        from ddpctl.images import bake as baking

        if dry_run:
            err(baking.plan_text(spec, "up", push=False, pip=pip, allow_credentials=allow_credentials).rstrip())
            spec = baking.with_image(spec, baking.planned_ref(spec, baking.scan(spec, allow_credentials=allow_credentials)))
        else:
            spec = baking.bake(spec, push=False, pip=pip, allow_credentials=allow_credentials)
    else:
        workspace_options.refuse_unused(pip, spec.workspace.requirements, flag="--bake", allow_credentials=allow_credentials)

    spec, engine = job_engine.for_spec(spec)
    plan = plan_local(spec, cwd=Path.cwd(), default_user=_caller(), host_cpus=executor.host_cpus(engine))
    if dry_run:
        import yaml

        from ddpctl.local.executor.preflight import secret_values

        secret_values(plan, os.environ)  # an unset --secret-env variable: refused as the real run refuses it

        typer.echo(yaml.safe_dump(plan.to_dict(), sort_keys=False), nl=False)
        return

    if detach and plan.max_restarts:
        from ddpctl.errors import UsageError

        raise UsageError(f"--max-restarts {plan.max_restarts} needs an attached 'ddpctl up': it is the process "
                         "that restarts the job, and -d returns at once",
                         "drop -d (keep it running with nohup or tmux), or use --max-restarts 0")
    from ddpctl.local import restarts
    from ddpctl.watch import tensorboard

    started = executor.start_job(plan, engine, resume=resume, say=err)
    job = started.job
    on = f" on {len(spec.docker_hosts)} Docker host(s)" if spec.docker_hosts else ""
    where = f"volume {plan.checkpoint_volume}" if plan.checkpoint_volume else "your mount"
    tb_dir = tensorboard.flag_value(plan.containers[0].argv)
    err(f"job {plan.job}: {len(job.ids)} node(s){on}, world size {plan.world_size}, image {plan.image}"
        + (f", up to {plan.max_restarts} restart(s), checkpoints in {restarts.CHECKPOINT_DIR} ({where})"
           if plan.max_restarts else "")
        + (", resuming from its checkpoints" if resume else "")
        + (f", TensorBoard event files in {tb_dir} ('ddpctl status {plan.job}' says where and how to look at them)"
           if tb_dir else "")
        + f" (started in {started.seconds:.1f}s)")
    note = restarts.checkpoint_cadence_note(plan.containers[0].argv) if plan.max_restarts else None
    if note:
        err(note)
    if detach:
        for rank in sorted(job.ids):
            typer.echo(plan.containers[rank].name)
        return
    try:
        finished = executor.run_attached(job, engine, rm=rm, color=stdout_color(sys.stdout), say=err,
                                         argv=sys.argv[1:], wait_s=wait_s)
    except executor.Stopped as stop:
        if stop.closed:
            silence_stdout()
        sys.exit(stop.exit_code)
    if not rm:  # with --rm the removal has kept it already
        from ddpctl.watch import history

        kept = history.keep(engine, plan.job)  # 'ddpctl logs/status' read it once the containers are gone
        if kept:
            err(f"job {plan.job}: output kept in {kept}")
    if finished.failure is not None:
        raise finished.failure
    again = f" after {finished.restarts} restart(s)" if finished.restarts else ""
    err(f"job {plan.job} finished{again}: all {len(job.ids)} node(s) exited 0"
        + ("" if rm else f"; remove it with '{shlex.join(['ddpctl', 'down', plan.job])}'"))


# The spec flags come from the spec's field table (every field whose flag the up command offers).
app.command("up", context_settings={"allow_interspersed_args": False})(
    so.install(up, so.command_params("up", _UP_OPTIONS)))

def silence_stdout() -> None:
    """Point stdout at /dev/null so that nothing (not even the final flush) writes to a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
