"""``ddpctl status`` and ``ddpctl plot``: a job's progress from the records its ranks write
(:mod:`ddpctl.watch`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from ddpctl.cli import cluster  # noqa: F401  (registers up/ps/logs/down first: the order --help lists)
from ddpctl.cli.app import app, err
from ddpctl.cli.docker_hosts import DockerHostsOpt


def _status(job: str | None, slurm: str | None, directory: Path, docker_hosts) -> dict:
    from ddpctl.errors import UsageError

    if bool(job) == bool(slurm):
        raise UsageError("give a job name or --slurm JOBID (not both)", "e.g. 'ddpctl status ddp'")
    if slurm:
        from ddpctl.watch import sources, status

        return status.build(sources.slurm_view(slurm, directory), time.time())
    from ddpctl.api.jobs import engine_for, status_dict

    return status_dict(job, lambda: engine_for(docker_hosts))  # what ddpctl.Job.status() reads


MIN_INTERVAL_S, MAX_INTERVAL_S = 0.1, 86400.0  # status --watch --interval


@app.command("status")
def status_cmd(
    job: Annotated[Optional[str], typer.Argument(help="Job name (a running job, or one whose output was kept).",
                                                 show_default=False)] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh every --interval seconds until the job "
                                                              "ends (in place on a terminal).")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between refreshes of --watch (0.1 to "
                                                               "86400).")] = 2.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object (with --watch: one per refresh, "
                                                        "one line each).")] = False,
    slurm: Annotated[Optional[str], typer.Option("--slurm", metavar="JOBID", help="A Slurm job started from a "
                                                 "rendered script: its output file in --dir.",
                                                 show_default=False)] = None,
    directory: Annotated[Path, typer.Option("--dir", help="The Slurm job's submit directory (with --slurm).")]
    = Path("."),
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """Where a job stands: per node its state, restarts, exit code and the age of its last output line; per
    rank its step/total, %, samples/s, loss, ETA and last checkpoint, the slowest rank marked. Reads the
    progress records the ranks write (ddp-train does; any script can: ddp_train.progress.report, or the
    Lightning callback ddp_train.lightning_progress.ProgressCallback). After 'ddpctl down' it reads the job's
    kept output. A job whose ddp-train writes TensorBoard event files (--tensorboard) gets a line saying where
    they are and how to look at them.

    What a job prints is untrusted: status reads each node's last 5000 lines, at most 16 MiB or 200,000 lines
    of each (lines cut at 64 KiB; what was left out is said); a record that fails progress.schema.json or
    summary.schema.json is counted and not used; text the job chose (host names, checkpoint paths) is shown
    with control characters as text such as \\x1b. --json is strict JSON (no NaN or Infinity: null).

    Examples:

      ddpctl status ddp

      ddpctl status ddp --watch

      ddpctl status --slurm 4242 --json
    """
    from ddpctl.errors import UsageError
    from ddpctl.watch import status

    if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:  # also NaN
        raise UsageError(f"--interval must be a number of seconds from {MIN_INTERVAL_S} to {MAX_INTERVAL_S:.0f}, "
                         f"got {interval}", "pass e.g. --interval 2")
    tty = sys.stdout.isatty() and not as_json
    shown = 0
    while True:
        st = _status(job, slurm, directory, docker_hosts)
        if as_json:  # strict JSON: the dict holds no NaN or infinity (status.build), and allow_nan=False says so
            typer.echo(json.dumps(st, separators=(",", ":") if watch else None, indent=None if watch else 1,
                                  allow_nan=False))
        else:
            lines = status.text(st)
            if tty and shown:
                sys.stdout.write(f"\x1b[{shown}F\x1b[J")  # back to the first line of the last refresh
            typer.echo("\n".join(lines))
            if watch and not tty:
                typer.echo("")
            shown = len(lines)
        if not watch or st["state"] != "running":
            return
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return


@app.command("plot")
def plot_cmd(
    jobs: Annotated[list[str], typer.Argument(help="Job names (running or kept), kept job folders, or files with "
                                               "progress records; several are drawn side by side.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The PNG to write (replaced whole; never "
                                                                "through a link).")] = Path("progress.png"),
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """A PNG of loss and samples/s against step, one line per rank, restarts marked by dashed lines; several
    jobs side by side. Needs matplotlib (the bench extra).

    Reads at most 16 MiB or 200,000 lines of each node's newest output (of a file: its last 32 MiB), lines cut
    at 64 KiB; what was left out is said on stderr. Only records that pass progress.schema.json are drawn.

    Example:

      ddpctl plot ddp -o ddp.png
    """
    from ddpctl.outfiles import check_directory, check_target
    from ddpctl.watch import plot, sources

    check_directory(output.parent)  # the -o rules (ddpctl.outfiles), before any job is read
    check_target(output)
    views = []
    engine = None
    for name in jobs:
        p = Path(name)
        if p.exists() and (p.is_file() or (p / "meta.json").exists()):
            views.append(sources.file_view(p))
            continue
        if engine is None:
            from ddpctl.api.jobs import engine_for
            from ddpctl.errors import EngineError

            try:
                engine = engine_for(docker_hosts)
                engine.ping()
            except EngineError:
                engine = False
        view = sources.docker_view(engine, name, tail=None) if engine else None
        views.append(view or sources.job_view(None, name, tail=None))
    from ddpctl.joboutput.visible import visible

    for view in views:
        for note in view.notes:
            err(visible(f"{view.job}: {note}"))
    for note in plot.draw(views, output):
        err(visible(note))
    err(f"wrote {output}")
