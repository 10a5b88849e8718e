"""Find jobs by label: ``ps`` rows, ``logs`` (merged or followed), the list of jobs for ``down --all``."""

from __future__ import annotations

import queue
import shlex
import time
from dataclasses import dataclass
from typing import Iterator

from ddpctl.errors import EngineError, UsageError
from ddpctl.joboutput.lines import split_lines
from ddpctl.launch import LABEL_JOB, LABEL_NODE_RANK, job_label
from ddpctl.local.engine_interface import ContainerInfo, Engine
from ddpctl.local.executor.common import MANAGED, Say, say_nothing
from ddpctl.local.restarts import LABEL_RESTARTS


@dataclass(frozen=True)
class NodeRow:
    job: str
    rank: int
    name: str
    state: str
    exit_code: int | None
    created: float
    restarts: int | None = None  # how many times the job was restarted before this container (None: no restarts)
    host: str = ""  # the Docker host, when the engine spans several


def list_nodes(engine: Engine, job: str | None = None) -> list[NodeRow]:
    rows = []
    for c in engine.containers(label=job_label(job) if job else MANAGED):
        if LABEL_JOB not in c.labels:
            continue
        rank = int(c.labels.get(LABEL_NODE_RANK, "-1")) if c.labels.get(LABEL_NODE_RANK, "").isdigit() else -1
        restarts = c.labels.get(LABEL_RESTARTS, "")
        rows.append(NodeRow(c.labels[LABEL_JOB], rank, c.name, c.state, c.exit_code, c.created,
                            int(restarts) if restarts.isdigit() else None, host=c.host))
    return sorted(rows, key=lambda r: (r.job, r.rank, r.host))


def format_age(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def job_nodes(engine: Engine, job: str, node: int | None = None) -> dict[int, ContainerInfo]:
    found = {}
    for c in engine.containers(label=job_label(job)):
        r = c.labels.get(LABEL_NODE_RANK, "")
        if r.isdigit() and (node is None or int(r) == node):
            found[int(r)] = c
    if not found:
        what = f"node {node} of job {job}" if node is not None else f"job {job}"
        raise UsageError(f"no containers for {what}", "list jobs with 'ddpctl ps'")
    return found


def merged_logs(engine: Engine, job: str, *, node: int | None = None, tail: int | None = None,
                since: float | None = None) -> list[tuple[int, str]]:
    """Every node's log lines, merged in time order."""
    entries: list[tuple[str, int, str]] = []
    for rank, c in job_nodes(engine, job, node).items():
        for line in split_lines(engine.logs(c.id, tail=tail, since=since, timestamps=True)):
            stamp, _, text = line.partition(" ")
            entries.append((stamp, rank, text))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [(rank, text) for _, rank, text in entries]


def follow_logs(engine: Engine, job: str, *, node: int | None = None, tail: int | None = None,
                since: float | None = None, say: Say = say_nothing, wait_s: float | None = None) -> Iterator[tuple[int, str]]:
    """(node, line) as the nodes print them, until every node's stream ends. A broken stream is resumed after
    its last line once the engine answers (waiting up to ``wait_s``, default ``DDPCTL_ENGINE_WAIT``); an engine
    that does not come back is one :class:`EngineError`."""
    from ddpctl.local.executor.stream import Streams, await_engine, engine_wait_s

    wait_s = engine_wait_s() if wait_s is None else wait_s
    nodes = job_nodes(engine, job, node)
    streams = Streams(engine, wait_for_exit=False)
    for rank, c in nodes.items():
        streams.follow(rank, c.id, tail=tail, since=since)
    open_streams = set(nodes)
    several = len(engine.endpoints()) > 1
    try:
        while open_streams:
            try:
                kind, rank, value, extra = streams.q.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "exit":
                open_streams.discard(rank)
            elif kind == "line":
                yield rank, value
            else:
                what = f"Docker host {extra}" if several else f"the Docker Engine at {extra}"
                away = await_engine(engine, extra, value, wait_s=wait_s, say=say, describe=lambda _, w=what: w)
                if away is None:
                    raise EngineError(f"{what} went away ({value[:160]}) and did not come back within {wait_s:.0f} s",
                                      f"run '{shlex.join(['ddpctl', 'logs', job, '--follow'])}' again when it answers") from None
                if engine.inspect(nodes[rank].id) is None:
                    open_streams.discard(rank)  # removed meanwhile ('ddpctl down'): nothing more to show
                else:
                    streams.refollow(rank, nodes[rank].id)
    finally:
        streams.close()


def all_jobs(engine: Engine) -> list[str]:
    jobs = {c.labels.get(LABEL_JOB) for c in engine.containers(label=MANAGED)}
    jobs |= {n.labels.get(LABEL_JOB) for n in engine.networks(label=MANAGED)}
    jobs |= {v.labels.get(LABEL_JOB) for v in engine.volumes(label=MANAGED)}
    return sorted(j for j in jobs if j)


def wait_for_line(engine: Engine, cid: str, needle: str, timeout: float) -> bool:
    """Used by benchmarks: block until ``needle`` shows in a container's output."""
    deadline = time.monotonic() + timeout
    for line in split_lines(engine.logs(cid, follow=True)):
        if needle in line:
            return True
        if time.monotonic() > deadline:
            return False
    return False
