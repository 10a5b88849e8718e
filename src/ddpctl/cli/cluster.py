"""``ddpctl ps | logs | down``: the jobs that ``ddpctl up`` (:mod:`ddpctl.cli.up`) started."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from ddpctl.cli import up  # noqa: F401  (registers 'up' first: the order --help lists)
from ddpctl.cli.app import app, err
from ddpctl.cli.docker_hosts import DockerHostsOpt
from ddpctl.cli.up import stdout_color


@app.command("ps")
def ps(
    job: Annotated[Optional[str], typer.Argument(help="Only this job.", show_default=False)] = None,
    all_jobs: Annotated[bool, typer.Option("--all", "-a", help="Also the finished jobs whose output was kept "
                                                            "(result, duration, final samples/s).")] = False,
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """List ddpctl jobs on this host (or on every --docker-hosts host): nodes, state, exit codes, restarts
    (up --max-restarts), age, progress (step/total and ETA, from the ranks' progress records: each node's
    last 5000 lines, at most 16 MiB or 200,000 lines of each, read; a record that fails its schema is not used).

    Examples:

      ddpctl ps

      ddpctl ps --all
    """
    from ddpctl.api.jobs import engine_for
    from ddpctl.local import executor

    engine = engine_for(docker_hosts)
    rows = executor.list_nodes(engine, job)
    if rows:
        _ps_table(engine, rows)
    if all_jobs:
        _ps_kept(job, {r.job for r in rows}, bool(rows))
    elif not rows:
        err("no ddpctl jobs" + (f" named {job}" if job else "") + " ('ddpctl ps --all' lists finished ones)")


def _ps_table(engine, rows) -> None:
    from ddpctl.local import executor
    from ddpctl.watch import sources, status

    now = time.time()
    cells = {}
    for name in sorted({r.job for r in rows}):
        view = sources.docker_view(engine, name)
        cells[name] = status.progress_cell(status.build(view, now)) if view else "-"
    hosts = any(r.host for r in rows)
    table = [("JOB", "NODE", "CONTAINER", "STATE", "EXIT", "RESTARTS", "AGE", "PROGRESS")
             + (("DOCKER HOST",) if hosts else ())]
    for r in rows:
        table.append((r.job, str(r.rank), r.name, r.state, "" if r.exit_code is None else str(r.exit_code),
                      str(r.restarts or 0), executor.format_age(now - r.created), cells[r.job] if r.rank == 0 else "")
                     + ((r.host,) if hosts else ()))
    _print_table(table)


def _ps_kept(job, live: set, shown: bool) -> None:
    from ddpctl.joboutput import kept_output

    kept = [k for k in kept_output.all_kept() if k.meta.get("job") not in live and (job is None or
                                                                              k.meta.get("job") == job)]
    if not kept:
        if not shown:
            err("no ddpctl jobs" + (f" named {job}" if job else "") + f", and no kept ones in {kept_output.root()}")
        return
    if shown:
        typer.echo("")
    table = [("JOB", "RESULT", "NODES", "RESTARTS", "ENDED", "DURATION", "SAMPLES/S", "KEPT IN")]
    now = time.time()
    for k in kept:
        m = k.meta
        ended = _finite(m.get("ended"))
        duration = _finite(m.get("duration_s"))
        rate = _finite(m.get("final_samples_per_sec"))
        table.append((str(m.get("job", k.folder.name)), str(m.get("result") or "-"), str(m.get("nodes", "-")),
                      str(m.get("restarts", 0)), "-" if not ended else _ago(now - ended) + " ago",
                      "-" if duration is None else f"{duration:.0f}s",
                      "-" if rate is None else f"{rate:,.1f}", str(k.folder)))
    _print_table(table)


def _finite(value) -> float | None:
    """A number from kept metadata (a file that may be old or edited): a finite one, else None."""
    import math

    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and abs(value) < 1e15 else None


def _ago(seconds: float) -> str:
    from ddpctl.local import executor

    return executor.format_age(seconds)


def _print_table(table) -> None:
    from ddpctl.joboutput.visible import visible

    table = [tuple(visible(cell) for cell in row) for row in table]  # job output and kept metadata: shown as text
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _since(value: str | None) -> float | None:
    from ddpctl.api.jobs import since_time

    return since_time(value, flag="--since")


@app.command("logs")
def logs(
    job: Annotated[str, typer.Argument(help="Job name.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming until the nodes exit.")] = False,
    node: Annotated[Optional[int], typer.Option("--node", help="Only this node rank.", show_default=False)] = None,
    tail: Annotated[Optional[int], typer.Option("--tail", help="Last N lines of each node (0 to 10,000,000).",
                                                show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only lines newer than this (30s, 10m, 2h, 1d: at "
                                                 "most 100 years; or a Unix time).",
                                                 show_default=False)] = None,
    records: Annotated[bool, typer.Option("--records", help="Also the ranks' progress records (JSON lines that "
                                                           "'ddpctl status' reads; hidden by default).")] = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print each line as the job printed it, control characters "
                                                   "and terminal escapes included (only invalid UTF-8 is "
                                                   "replaced). Without it, on a terminal or not, they are shown "
                                                   "as text such as \\x1b; tabs are kept.")]
    = False,
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """Print a job's output, all nodes merged in time order, each line prefixed with its node and rank
    ('node-1 rank-3 | ...'; 'node-1 | ...' for the node's launcher). Ranks that printed nothing are named
    in one line on stderr. After 'ddpctl down' (or the end of an attached 'up') it prints the output kept
    in the job's folder under the state directory ('ddpctl ps --all').

    What a job prints is shown safely: control characters and terminal escape sequences (cursor moves, window
    titles, clipboard writes, bidi overrides) appear as text such as \\x1b, whether stdout is a terminal or
    not; --raw prints the bytes as the job wrote them. A line over 64 KiB is cut there, saying how much was
    left out.

    With --follow, a Docker Engine that goes away is waited for (DDPCTL_ENGINE_WAIT seconds, default 60) and
    the output goes on after its last line when it answers again; one that does not is one error line.

    Example:

      ddpctl logs ddp --node 0 --tail 20
    """
    from ddpctl.api.job_output import check_count
    from ddpctl.api.jobs import engine_for, log_lines

    for flag, value in (("--node", node), ("--tail", tail)):
        check_count(flag, value)
    start = _since(since)
    lines = log_lines(job, engine_for(docker_hosts), follow=follow, node=node, tail=tail, since=start,
                      records=records, color=stdout_color(sys.stdout), say=err, raw=raw)  # what ddpctl.Job.logs() yields
    try:
        for line in lines:
            if raw:  # as printed: typer.echo would strip some escapes (CSI) when stdout is no terminal
                sys.stdout.write(line + "\n")
                if follow:
                    sys.stdout.flush()
            else:
                typer.echo(line)
    except KeyboardInterrupt:
        if not follow:
            raise


@app.command("down")
def down(
    job: Annotated[Optional[str], typer.Argument(help="Job name.", show_default=False)] = None,
    all_jobs: Annotated[bool, typer.Option("--all", help="Every ddpctl job on this host (or on every "
                                                      "--docker-hosts host).")] = False,
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """Stop and remove a job's containers, network and checkpoint volume (safe to repeat; a missing job is not
    an error). A directory you mounted at /checkpoints yourself is never touched.

    Examples:

      ddpctl down ddp

      ddpctl down --all
    """
    from ddpctl.api.jobs import engine_for, remove
    from ddpctl.errors import UsageError
    from ddpctl.local import executor

    if bool(job) == all_jobs:
        raise UsageError("give a job name or --all (not both)", "e.g. 'ddpctl down ddp'")
    engine = engine_for(docker_hosts)
    jobs = executor.all_jobs(engine) if all_jobs else [job]
    if not jobs:
        err("no ddpctl jobs to remove")
    from ddpctl.joboutput.kept_output import KeepFailed

    failed = 0
    for j in jobs:
        try:
            removed = remove(engine, j)  # what ddpctl.Job.down() does
        except KeepFailed as exc:
            if not all_jobs:
                raise
            err(f"error: {exc.message}")  # the others are still removed; the exit code says one was not
            failed += 1
            continue
        if removed:
            vols = f" and {removed.volumes} volume(s)" if removed.volumes else ""
            where = f"; its output is kept in {removed.kept}" if removed.kept else ""
            where += f" (TensorBoard event files: {removed.tensorboard})" if removed.tensorboard else ""
            err(f"job {j}: removed {removed.containers} container(s){',' if vols else ' and'} {removed.networks} "
                f"network(s){vols}{where}")
        else:
            err(f"job {j}: nothing to remove")
    if failed:
        raise typer.Exit(1)
