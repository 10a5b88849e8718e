"""Wait on a started job: stream every node's output until all exit, stop the rest at the first failure,
and name the root cause.

The one place that attaches to a job's containers and waits for them (:func:`attach`); what a failed
node's launcher said is read back by :func:`job_root_cause` and put in one line by :func:`failure_message`.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ddpctl.errors import JobFailed
from ddpctl.local.engine import ContainerInfo, Engine
from ddpctl.local.executor.common import _reason, _split_lines
from ddpctl.local.executor.create import Job
from ddpctl.local.executor.lines import (
    LAUNCH_FAILURE,
    PEER_GRACE_S,
    format_line,
    label_width,
    parse_launch_failure,
    peer_loss_line,
)


class OutputClosed(Exception):
    """stdout was closed by its reader (``ddpctl up ... | head``)."""


def _stdout_closed(out) -> bool:
    """Has the reader of ``out`` gone away (a pipe whose read end is closed)? Checked without writing."""
    import select

    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    try:
        p = select.poll()
        p.register(fd, 0)  # POLLERR/POLLHUP are reported whatever the mask
        return any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, ev in p.poll(0))
    except (OSError, ValueError):
        return False


@dataclass
class Outcome:
    codes: dict[int, int]  # node -> exit code, in the order the nodes exited
    first_failure: int | None  # node
    interrupted: bool = False
    stopped: set[int] = field(default_factory=set)  # nodes ddpctl stopped after the first failure


def attach(job: Job, engine: Engine, *, out=None, color: bool = False, stop_on_failure: bool = True,
           mute_after: Callable[[int], bool] | None = None) -> Outcome:
    """Stream every node's output until all exit; stop the job at the first failure.

    Each line is ``node-N rank-R | text`` (a worker) or ``node-N | text`` (the node's launcher). Raises
    :class:`OutputClosed` when nobody reads stdout any more; the caller stops the job then.
    ``mute_after(code)`` (given for a job that restarts on failure): when it is true for the first failed
    node's exit code, the other nodes' lines from then on (their errors while they stop) are not written, nor
    is any rank's or launcher's report of a retryable failure (a lost peer): the restart says it in one line.
    """
    from ddpctl.watch.live import LiveLine, consume

    out = out or sys.stdout
    live = LiveLine.on(out, job.restarts)  # a terminal: one live progress line under the rank lines
    q: queue.Queue = queue.Queue()
    width = label_width(len(job.plan.containers) or max(job.ids) + 1, job.plan.world_size)

    def pump(rank: int, cid: str) -> None:
        try:
            for line in _split_lines(engine.logs(cid, follow=True)):
                q.put(("line", rank, line))
        except Exception as exc:  # noqa: BLE001 - the container was removed under us
            q.put(("line", rank, f"[ddpctl] log stream ended: {_reason(exc)}"))
        q.put(("exit", rank, engine.wait(cid)))

    threads = [threading.Thread(target=pump, args=(r, c), daemon=True) for r, c in job.ids.items()]
    for t in threads:
        t.start()
    codes: dict[int, int] = {}
    first: int | None = None
    stopped: set[int] = set()
    lost_peer: set[int] = set()  # nodes whose launcher said its failure was a lost peer
    stop_at: float | None = None
    muted = False

    def stop_the_rest() -> None:
        for r, cid in job.ids.items():
            if r not in codes and r not in stopped:
                stopped.add(r)
                threading.Thread(target=engine.stop, args=(cid, 5), daemon=True).start()

    while len(codes) < len(job.ids):
        if stop_at is not None and time.monotonic() >= stop_at:
            stop_at = None
            stop_the_rest()
        try:
            kind, rank, value = q.get(timeout=0.2)
        except queue.Empty:
            if _stdout_closed(out):
                raise OutputClosed() from None
            continue
        if kind == "line":
            found = LAUNCH_FAILURE.match(value)
            if found and "lost a peer" in (found.group(3) or ""):
                lost_peer.add(rank)
            if muted or (mute_after is not None and peer_loss_line(value)) or consume(live, value):
                continue
            try:
                (live or out).write(format_line(rank, value, width, color) + "\n")
                out.flush()
            except BrokenPipeError:
                raise OutputClosed() from None
            continue
        codes[rank] = value
        if value != 0 and first is None:
            first = rank
            muted = mute_after is not None and mute_after(value)
            if stop_on_failure:
                # A node that only lost its peer failed second: give the node that failed first a moment to
                # report its own root cause before it is stopped.
                stop_at = time.monotonic() + (PEER_GRACE_S if rank in lost_peer else 0.0)
    if live is not None:
        live.close()
    return Outcome(codes, first, stopped=stopped)


@dataclass(frozen=True)
class NodeFailure:
    """What a failed node's launcher said about its root cause (its last ``ddp-train-launch`` line)."""

    node: int
    exit_code: int
    rank: int | None = None
    last_line: str = ""
    secondary: bool = False  # the node failed because another one did (lost a peer, stopped by ddpctl)


def node_failure(engine: Engine, node: int, cid: str, code: int, *, stopped: bool = False) -> NodeFailure:
    lines = list(_split_lines(engine.logs(cid, tail=40)))
    found = parse_launch_failure(lines)
    if found is None:
        by_signal = any(line.startswith("ddp-train-launch: stopped by ") for line in lines[-3:])
        return NodeFailure(node, code, secondary=stopped and (by_signal or code in (137, 143)))
    rank, _, notes, last = found
    return NodeFailure(node, code, rank, last, secondary="lost a peer" in notes or (stopped and code == 143))


def root_cause(failures: list[NodeFailure]) -> NodeFailure:
    """The node to blame: the first (in exit order) that did not fail because of another one."""
    primary = [f for f in failures if not f.secondary]
    return (primary or failures)[0]


def job_root_cause(job: Job, engine: Engine, outcome: Outcome) -> NodeFailure | None:
    failed = [(n, c) for n, c in outcome.codes.items() if c != 0]
    if not failed:
        return None
    found = []
    for node, code in failed:
        try:
            found.append(node_failure(engine, node, job.ids[node], code, stopped=node in outcome.stopped))
        except Exception:  # noqa: BLE001 - the logs are gone: still name the node and its code
            found.append(NodeFailure(node, code, secondary=node in outcome.stopped))
    return root_cause(found)


def failure_message(job: str, rank: int, code: int, info: ContainerInfo | None,
                    cause: NodeFailure | None = None) -> JobFailed:
    """One line: the node, its container, the root-cause rank, exit code and last error line."""
    name = info.name if info else f"{job}-node-{rank}"
    why = " (OOM-killed)" if info and info.oom_killed else " (killed)" if code == 137 else ""
    text = f"node {rank} ({name}) of job {job} exited with code {code}{why}"
    if cause is not None and cause.rank is not None:
        last = cause.last_line or "(no error output)"
        text = f"node {rank} ({name}) of job {job} failed: rank {cause.rank} exited with code {code}{why}: {last}"
    exc = JobFailed(text, f"see 'ddpctl logs {job} --node {rank}'; remove the job with 'ddpctl down {job}'")
    exc.exit_code = code if 0 < code < 256 else 1
    return exc

