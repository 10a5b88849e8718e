"""Wait on a started job: stream every node's output until all exit, stop the rest at the first failure,
and name the root cause.

The one place that attaches to a job's containers and waits for them (:func:`attach`); what a failed
node's launcher said is read back by :func:`job_root_cause` and put in one line by :func:`failure_message`.
"""

from __future__ import annotations

import queue
import re
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ddpctl.errors import JobFailed
from ddpctl.joboutput.lines import (
    LAUNCH_FAILURE,
    PEER_GRACE_S,
    format_line,
    label_width,
    parse_launch_failure,
    peer_loss_line,
    says_lost_peer,
    split_lines,
    split_rank,
)
from ddpctl.joboutput.records import read_record
from ddpctl.joboutput.visible import visible
from ddpctl.local.engine_interface import ContainerInfo, Engine
from ddpctl.local.executor.common import Say, say_nothing
from ddpctl.local.executor.create import Job
from ddpctl.local.executor.stream import EngineWatch, Streams, await_engine, engine_wait_s


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


@dataclass(frozen=True)
class Lost:
    """A Docker Engine (or host) that stopped answering and did not come back within the wait."""

    endpoint: str
    reason: str
    waited_s: float


@dataclass
class Outcome:
    codes: dict[int, int]  # node -> exit code, in the order the nodes exited
    first_failure: int | None  # node
    interrupted: bool = False
    stopped: set[int] = field(default_factory=set)  # nodes ddpctl stopped after the first failure
    lost: Lost | None = None  # an engine that did not come back: the codes of its nodes are unknown
    outages: list[tuple[str, float]] = field(default_factory=list)  # (engine, seconds away) it came back from
    step: int | None = None  # the highest training step a node's output named
    summary: dict | None = None  # ddp-train's summary record (rank 0's last stdout line), when it printed one


_STEP = (re.compile(r"\(global (\d{1,15})\)"), re.compile(r"\bat (?:epoch \d+ )?step (\d{1,15})\b"))
def read_line(outcome: Outcome, text: str) -> None:
    """What a node's line tells about the run: the step it reached, ddp-train's summary record (one that
    passes summary.schema.json: ddpctl.joboutput.record_check)."""
    if text.startswith("{"):
        found = read_record(text)
        if isinstance(found, tuple):
            if found[0] == "summary":
                outcome.summary = found[1]
            return
    for pattern in _STEP:
        m = pattern.search(text)
        if m:
            outcome.step = max(outcome.step or 0, int(m.group(1)))


def attach(job: Job, engine: Engine, *, out=None, color: bool = False, stop_on_failure: bool = True,
           mute_after: Callable[[int], bool] | None = None, say: Say = say_nothing,
           wait_s: float | None = None, watch: EngineWatch | None = None) -> Outcome:
    """Stream every node's output until all exit; stop the job at the first failure.

    Each line is ``node-N rank-R | text`` (a worker) or ``node-N | text`` (the node's launcher). Raises
    :class:`OutputClosed` when nobody reads stdout any more; the caller stops the job then.
    ``mute_after(code)`` (given for a job that restarts on failure): when it is true for the first failed
    node's exit code, the other nodes' lines from then on (their errors while they stop) are not written, nor
    is any rank's or launcher's report of a retryable failure (a lost peer): the restart says it in one line.

    A broken stream or an engine that misses its heartbeat is waited for (``wait_s``, default
    ``DDPCTL_ENGINE_WAIT``; one line through ``say``); when it answers again the stream resumes after its last
    line, when it does not the outcome names it (:attr:`Outcome.lost`) and the caller ends the job.
    """
    from ddpctl.joboutput.live import LiveLine

    out = out or sys.stdout
    wait_s = engine_wait_s() if wait_s is None else wait_s
    live = LiveLine.on(out, job.restarts)  # a terminal: one live progress line under the rank lines
    width = label_width(len(job.plan.containers) or max(job.ids) + 1, job.plan.world_size)
    streams = Streams(engine)
    for r, c in job.ids.items():
        streams.follow(r, c)
    streams.heartbeat()
    outcome = Outcome({}, None)
    try:
        _loop(job, engine, streams, outcome, out=out, color=color, width=width, stop_on_failure=stop_on_failure,
              mute_after=mute_after, say=say, wait_s=wait_s, watch=watch, live=live)
    finally:
        streams.close()
        if live is not None:
            live.close()
    return outcome


def _loop(job: Job, engine: Engine, streams: Streams, outcome: Outcome, *, out, color: bool, width: int,
          stop_on_failure: bool, mute_after, say: Say, wait_s: float, watch: EngineWatch | None, live=None) -> None:
    from ddpctl.joboutput.live import consume

    codes, stopped = outcome.codes, outcome.stopped
    lost_peer: set[int] = set()  # nodes whose launcher said its failure was a lost peer
    fails: dict[int, int] = {}  # node -> broken streams in a row while its engine answered
    stop_at: float | None = None
    muted = False

    def stop_the_rest() -> None:
        for r, cid in job.ids.items():
            if r not in codes and r not in stopped:
                stopped.add(r)
                threading.Thread(target=_stop_quietly, args=(engine, cid), daemon=True).start()

    while len(codes) < len(job.ids):
        if stop_at is not None and time.monotonic() >= stop_at:
            stop_at = None
            stop_the_rest()
        for name, when, why in watch.breaks() if watch else ():
            streams.q.put(("lost", None, why, (name, when)))
        try:
            kind, rank, value, extra = streams.q.get(timeout=0.2)
        except queue.Empty:
            if _stdout_closed(out):
                raise OutputClosed() from None
            continue
        if kind == "lost":
            broke = None
            if isinstance(extra, tuple):  # the engine's event stream broke at that time
                extra, broke = extra
            if rank is not None and rank in codes:
                continue
            away = await_engine(engine, extra, value, wait_s=wait_s, say=say, describe=describe_engine(engine))
            if away is None:
                outcome.lost = Lost(extra, value, wait_s)
                return
            if broke is not None and away == 0:  # it went away, and was back before this was read
                away = time.monotonic() - broke
                say(f"{describe_engine(engine)(extra)} went away ({value[:160]}) and answers again after {away:.1f} s")
            if away > 0:
                outcome.outages.append((extra, away))
            if rank is not None:
                fails[rank] = fails.get(rank, 0) + 1
                if not _resume_stream(engine, streams, job, rank, fails[rank], outcome):
                    outcome.lost = Lost(extra, f"the output of node {rank} cannot be read ({value})", 0.0)
                    return
            continue
        if kind == "line":
            fails.pop(rank, None)
            read_line(outcome, split_rank(value)[1])
            found = LAUNCH_FAILURE.match(value)
            if found and says_lost_peer(found.group(3) or ""):
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
        if value != 0 and outcome.first_failure is None:
            outcome.first_failure = rank
            muted = mute_after is not None and mute_after(value)
            if stop_on_failure:
                # A node that only lost its peer failed second: give the node that failed first a moment to
                # report its own root cause before it is stopped.
                stop_at = time.monotonic() + (PEER_GRACE_S if rank in lost_peer else 0.0)


def _resume_stream(engine: Engine, streams: Streams, job: Job, rank: int, fails: int, outcome: Outcome) -> bool:
    """Node ``rank``'s stream broke while its engine answers: attach again after its last line. A container
    that is gone counts as exited (137, as a forced removal); False when the stream keeps breaking."""
    cid = job.ids[rank]
    try:
        info = engine.inspect(cid)
    except Exception:  # noqa: BLE001 - the engine went again: the heartbeat or the next stream says so
        info = None if fails > 10 else ContainerInfo(cid, "", state="unknown")
    if info is None:
        streams.q.put(("exit", rank, 137, None))
        return True
    if fails > 10:
        return False
    if fails > 2:
        time.sleep(min(fails, 5) * 0.2)
    streams.refollow(rank, cid)
    return True


def _stop_quietly(engine: Engine, cid: str) -> None:
    try:
        engine.stop(cid, 5)
    except Exception:  # noqa: BLE001 - a node that cannot be stopped is reported by its own stream
        pass


def describe_engine(engine: Engine) -> Callable[[str], str]:
    several = len(engine.endpoints()) > 1
    return lambda name: f"Docker host {name}" if several else f"the Docker Engine at {name}"


@dataclass(frozen=True)
class NodeFailure:
    """What a failed node's launcher said about its root cause (its last ``ddp-train-launch`` line)."""

    node: int
    exit_code: int
    rank: int | None = None
    last_line: str = ""
    secondary: bool = False  # the node failed because another one did (lost a peer, stopped by ddpctl)


def node_failure(engine: Engine, node: int, cid: str, code: int, *, stopped: bool = False) -> NodeFailure:
    lines = list(split_lines(engine.logs(cid, tail=40)))
    found = parse_launch_failure(lines)
    if found is None:
        by_signal = any(line.startswith("ddp-train-launch: stopped by ") for line in lines[-3:])
        return NodeFailure(node, code, secondary=stopped and (by_signal or code in (137, 143)))
    rank, _, notes, last = found
    return NodeFailure(node, code, rank, last, secondary=says_lost_peer(notes) or (stopped and code == 143))


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
        last = visible(cause.last_line) if cause.last_line else "(no error output)"
        text = f"node {rank} ({name}) of job {job} failed: rank {cause.rank} exited with code {code}{why}: {last}"
    exc = JobFailed(text, f"see '{shlex.join(['ddpctl', 'logs', job, '--node', str(rank)])}'; remove the job with "
                               f"'{shlex.join(['ddpctl', 'down', job])}'")
    exc.exit_code = code if 0 < code < 256 else 1
    return exc

