"""``ddpctl ps | logs | down``: the jobs that ``ddpctl up`` (:mod:`ddpctl.cli.up`) started."""

from __future__ import annotations

import re
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
    (up --max-restarts), age, progress (step/total and ETA, from the ranks' progress records).

    Examples:

      ddpctl ps

      ddpctl ps --all
    """
    from ddpctl.cli.docker_hosts import engine_for
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
    from ddpctl.watch import history

    kept = [k for k in history.all_kept() if k.meta.get("job") not in live and (job is None or
                                                                              k.meta.get("job") == job)]
    if not kept:
        if not shown:
            err("no ddpctl jobs" + (f" named {job}" if job else "") + f", and no kept ones in {history.root()}")
        return
    if shown:
        typer.echo("")
    table = [("JOB", "RESULT", "NODES", "RESTARTS", "ENDED", "DURATION", "SAMPLES/S", "KEPT IN")]
    now = time.time()
    for k in kept:
        m = k.meta
        rate = m.get("final_samples_per_sec")
        ended = m.get("ended")
        table.append((m.get("job", k.folder.name), m.get("result") or "-", str(m.get("nodes", "-")),
                      str(m.get("restarts", 0)), "-" if not ended else _ago(now - ended) + " ago",
                      "-" if m.get("duration_s") is None else f"{m['duration_s']:.0f}s",
                      "-" if rate is None else f"{rate:,.1f}", str(k.folder)))
    _print_table(table)


def _ago(seconds: float) -> str:
    from ddpctl.local import executor

    return executor.format_age(seconds)


def _print_table(table) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _since(value: str | None) -> float | None:
    if value is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", value.strip())
    if not m:
        from ddpctl.errors import UsageError

        raise UsageError(f"--since {value!r} is not a duration such as 30s, 10m, 2h or a Unix time",
                         "write e.g. --since 10m")
    number, unit = float(m.group(1)), m.group(2)
    if not unit and number > 1e9:
        return number  # a Unix time
    return time.time() - number * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


@app.command("logs")
def logs(
    job: Annotated[str, typer.Argument(help="Job name.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming until the nodes exit.")] = False,
    node: Annotated[Optional[int], typer.Option("--node", help="Only this node rank.", show_default=False)] = None,
    tail: Annotated[Optional[int], typer.Option("--tail", help="Last N lines of each node.",
                                                show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Only lines newer than this (30s, 10m, 2h).",
                                                 show_default=False)] = None,
    records: Annotated[bool, typer.Option("--records", help="Also the ranks' progress records (JSON lines that "
                                                           "'ddpctl status' reads; hidden by default).")] = False,
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """Print a job's output, all nodes merged in time order, each line prefixed with its node and rank
    ('node-1 rank-3 | ...'; 'node-1 | ...' for the node's launcher). Ranks that printed nothing are named
    in one line on stderr. After 'ddpctl down' (or the end of an attached 'up') it prints the output kept
    in the job's folder under the state directory ('ddpctl ps --all').

    With --follow, a Docker Engine that goes away is waited for (DDPCTL_ENGINE_WAIT seconds, default 60) and
    the output goes on after its last line when it answers again; one that does not is one error line.

    Example:

      ddpctl logs ddp --node 0 --tail 20
    """
    from ddpctl.cli.docker_hosts import engine_for
    from ddpctl.errors import UsageError
    from ddpctl.local import executor

    for flag, value in (("--node", node), ("--tail", tail)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be at least 0, got {value}", f"pass e.g. {flag} 0")
    from ddpctl.watch.records import is_record

    start = _since(since)
    engine = engine_for(docker_hosts)
    color = stdout_color(sys.stdout)
    try:
        nodes = executor.job_nodes(engine, job, node)
    except UsageError:
        if _kept_logs(job, node, tail, start, records, color):
            return
        raise
    expected = {n: executor.node_ranks(info.command) for n, info in nodes.items()}
    world = max([r.stop for r in expected.values() if r] or [1])
    width = executor.label_width(max(nodes) + 1, world)
    seen: dict[int, set[int]] = {n: set() for n in nodes}

    def show(n: int, line: str) -> None:
        r, text = executor.split_rank(line)
        if r is not None:
            seen[n].add(r)
        if not records and is_record(text):
            return
        typer.echo(executor.prefix(n, width, color, r) + text)

    if follow:
        try:
            for n, line in executor.follow_logs(engine, job, node=node, tail=tail, since=start, say=err):
                show(n, line)
        except KeyboardInterrupt:
            return
    else:
        for n, line in executor.merged_logs(engine, job, node=node, tail=tail, since=start):
            show(n, line)
    for n in sorted(nodes):
        note = executor.silent_ranks_line(n, expected[n], seen[n], window=tail is not None or since is not None)
        if note:
            err(note)


def _kept_logs(job: str, node, tail, start, records: bool, color: bool) -> bool:
    """``logs`` of a job that is gone: its kept output (the last attempt), as the containers gave it."""
    from ddpctl.local import executor
    from ddpctl.watch import history
    from ddpctl.watch.records import is_record, stamp_seconds

    kept = history.find(job)
    if kept is None:
        return False
    last = max((a for a, _ in kept.lines), default=0)
    picked: dict[int, list[tuple[str, str]]] = {}
    for (a, n), lines in kept.lines.items():
        if a == last and (node is None or n == node):
            sel = [ln for ln in lines if start is None or (stamp_seconds(ln[0]) or 0) >= start]
            picked[n] = sel[-tail:] if tail else ([] if tail == 0 else sel)
    if node is not None and node not in picked:
        return False
    entries = sorted((s, n, t) for n, ls in picked.items() for s, t in ls)
    world = int(kept.meta.get("world_size") or 0)
    width = executor.label_width(max(picked, default=0) + 1, max(world, len(picked)))
    for _, n, text in entries:
        r, body = executor.split_rank(text)
        if records or not is_record(body):
            typer.echo(executor.prefix(n, width, color, r) + body)
    err(f"job {job} is gone: its output as kept in {kept.folder}")
    return True


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
    from ddpctl.cli.docker_hosts import engine_for
    from ddpctl.errors import UsageError
    from ddpctl.local import executor

    if bool(job) == all_jobs:
        raise UsageError("give a job name or --all (not both)", "e.g. 'ddpctl down ddp'")
    engine = engine_for(docker_hosts)
    jobs = executor.all_jobs(engine) if all_jobs else [job]
    if not jobs:
        err("no ddpctl jobs to remove")
    from ddpctl.watch import history

    for j in jobs:
        n_c, n_n, n_v = executor.remove_job(engine, j)
        if n_c or n_n or n_v:
            vols = f" and {n_v} volume(s)" if n_v else ""
            kept = history.find(j) if n_c else None
            where = f"; its output is kept in {kept.folder}" if kept else ""
            tb = (kept.meta.get("tensorboard") or {}) if kept else {}
            files = tb.get("kept") or tb.get("host_path")
            where += f" (TensorBoard event files: {files})" if files else ""
            err(f"job {j}: removed {n_c} container(s){',' if vols else ' and'} {n_n} network(s){vols}{where}")
        else:
            err(f"job {j}: nothing to remove")
