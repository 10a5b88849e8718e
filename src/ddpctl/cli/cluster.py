"""``ddpctl ps | logs | down``: the jobs that ``ddpctl up`` (:mod:`ddpctl.cli.upcmd`) started."""

from __future__ import annotations

import re
import sys
import time
from typing import Annotated, Optional

import typer

from ddpctl.cli import upcmd  # noqa: F401  (registers 'up' first: the order --help lists)
from ddpctl.cli.app import app, err
from ddpctl.cli.dockerhosts import DockerHostsOpt
from ddpctl.cli.upcmd import stdout_color


@app.command("ps")
def ps(
    job: Annotated[Optional[str], typer.Argument(help="Only this job.", show_default=False)] = None,
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """List ddpctl jobs on this host (or on every --docker-hosts host): nodes, state, exit codes, restarts
    (up --max-restarts), age.

    Example:

      ddpctl ps
    """
    from ddpctl.cli.dockerhosts import engine_for
    from ddpctl.local import executor

    rows = executor.list_nodes(engine_for(docker_hosts), job)
    if not rows:
        err("no ddpctl jobs" + (f" named {job}" if job else ""))
        return
    now = time.time()
    hosts = any(r.host for r in rows)
    table = [("JOB", "NODE", "CONTAINER", "STATE", "EXIT", "RESTARTS", "AGE") + (("DOCKER HOST",) if hosts else ())]
    for r in rows:
        table.append((r.job, str(r.rank), r.name, r.state, "" if r.exit_code is None else str(r.exit_code),
                      str(r.restarts or 0), executor.format_age(now - r.created)) + ((r.host,) if hosts else ()))
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
    docker_hosts: DockerHostsOpt = None,
) -> None:
    """Print a job's output, all nodes merged in time order, each line prefixed with its node and rank
    ('node-1 rank-3 | ...'; 'node-1 | ...' for the node's launcher). Ranks that printed nothing are named
    in one line on stderr.

    With --follow, a Docker Engine that goes away is waited for (DDPCTL_ENGINE_WAIT seconds, default 60) and
    the output goes on after its last line when it answers again; one that does not is one error line.

    Example:

      ddpctl logs ddp --node 0 --tail 20
    """
    from ddpctl.cli.dockerhosts import engine_for
    from ddpctl.errors import UsageError
    from ddpctl.local import executor

    for flag, value in (("--node", node), ("--tail", tail)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be at least 0, got {value}", f"pass e.g. {flag} 0")
    start = _since(since)
    engine = engine_for(docker_hosts)
    color = stdout_color(sys.stdout)
    nodes = executor.job_nodes(engine, job, node)
    expected = {n: executor.node_ranks(info.command) for n, info in nodes.items()}
    world = max([r.stop for r in expected.values() if r] or [1])
    width = executor.label_width(max(nodes) + 1, world)
    seen: dict[int, set[int]] = {n: set() for n in nodes}

    def show(n: int, line: str) -> None:
        r, text = executor.split_rank(line)
        if r is not None:
            seen[n].add(r)
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
    from ddpctl.cli.dockerhosts import engine_for
    from ddpctl.errors import UsageError
    from ddpctl.local import executor

    if bool(job) == all_jobs:
        raise UsageError("give a job name or --all (not both)", "e.g. 'ddpctl down ddp'")
    engine = engine_for(docker_hosts)
    jobs = executor.all_jobs(engine) if all_jobs else [job]
    if not jobs:
        err("no ddpctl jobs to remove")
    for j in jobs:
        n_c, n_n, n_v = executor.remove_job(engine, j)
        if n_c or n_n or n_v:
            vols = f" and {n_v} volume(s)" if n_v else ""
            err(f"job {j}: removed {n_c} container(s){',' if vols else ' and'} {n_n} network(s){vols}")
        else:
            err(f"job {j}: nothing to remove")
