"""``ddpctl up``: run a job, one container per node, on this host or on several Docker hosts (``ps``, ``logs``
and ``down`` are in :mod:`ddpctl.cli.cluster`)."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Annotated

import typer

from ddpctl.api import workspace_rules
from ddpctl.cli import spec_options as so
from ddpctl.cli import workspace_options
from ddpctl.cli.app import app, err


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
    'ddpctl logs' / 'ddpctl ps' / 'ddpctl down'. Control characters in the job's lines (terminal escapes)
    are shown as text such as \\x1b, as 'ddpctl logs' shows them ('ddpctl logs --raw' gives them as printed).

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
    from ddpctl.api import jobs
    from ddpctl.cli import docker_hosts as dh
    from ddpctl.local import executor

    detach, dry_run, rm, bake = kw.pop("detach"), kw.pop("dry_run"), kw.pop("rm"), kw.pop("bake")
    resume = kw.pop("resume")
    pip = workspace_rules.pip_options(kw)
    allow_credentials = kw.pop("allow_credential_files", False)
    job_file = kw.get("file")
    workspace_rules.absolute_code_paths(kw, bool(bake))
    spec = dh.up_spec(kw)
    wait_s = executor.engine_wait_s()  # a bad DDPCTL_ENGINE_WAIT is refused before anything starts
    if resume:
        executor.check_resume(spec.max_restarts, spec.name)
    # ddpctl.up is these same calls (ddpctl.api.job_start): prepare, start, run_attached
    prepared = jobs.prepare(spec, bake=bool(bake), pip=pip, allow_credentials=allow_credentials,
                            job_file=None if job_file is None else str(job_file), dry_run=dry_run, say=err)
    if dry_run:
        import yaml

        from ddpctl.local.executor.preflight import secret_values

        secret_values(prepared.plan, os.environ)  # an unset --secret-env variable: refused as the real run refuses it

        typer.echo(yaml.safe_dump(prepared.plan.to_dict(), sort_keys=False), nl=False)
        return
    launched = jobs.start(prepared, detach=detach, resume=resume, say=err)
    if detach:
        for rank in sorted(launched.started.ids):
            typer.echo(prepared.plan.containers[rank].name)
        return
    try:
        outcome = jobs.run_attached(launched, rm=rm, color=stdout_color(sys.stdout), say=err, argv=sys.argv[1:],
                                    wait_s=wait_s)
    except executor.Stopped as stop:
        if stop.closed:
            silence_stdout()
        sys.exit(stop.exit_code)
    outcome.check()
    err(outcome.message + (f"; {outcome.fix}" if outcome.fix else ""))


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
