"""How a job ended (:class:`Outcome`, with the exit code ``ddpctl up`` would give): waiting for its nodes, the
root cause of a failure as the attached ``up`` names it, and the outcome of a job that is gone (its kept output)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet

from ddpctl.api.job_output import current_nodes
from ddpctl.errors import JobFailed, UsageError

if TYPE_CHECKING:
    from ddpctl.local.engine_interface import ContainerInfo, Engine


@dataclass(frozen=True)
class Outcome:
    """How a job ended, as ``ddpctl up`` (attached) reports it.

    ``exit_code`` is what the CLI would exit with: 0 when every node exited 0 and the program said it
    finished; a failed node's exit code (1 for one outside 1..255); 69 when a Docker Engine went away for
    good. ``message`` and ``fix`` are its one line (the ``error:`` line of the CLI on a failure).
    """

    job: str
    exit_code: int
    message: str
    fix: str = ""
    node_exit_codes: dict[int, int] = field(default_factory=dict)
    summary: dict | None = None  #: ddp-train's summary record, when it printed one
    rank: int | None = None  #: the rank a failure is blamed on, when its node's launcher named one

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def check(self) -> Outcome:
        """Raise :class:`ddpctl.JobFailed` (with this exit code and line) unless it succeeded; else self."""
        if not self.succeeded:
            exc = JobFailed(self.message, self.fix)
            exc.exit_code = self.exit_code
            raise exc
        return self

    @classmethod
    def of_failure(cls, job: str, failure: JobFailed, codes: dict[int, int], summary: dict | None,
                   rank: int | None = None) -> Outcome:
        return cls(job, failure.exit_code, failure.problem, failure.fix, codes, summary, rank)



def wait_for_exit(engine: Engine, name: str, timeout: float | None, *, stop_on_failure: bool = True,
                  poll_s: float = 1.0) -> tuple[dict[int, ContainerInfo], set[int]]:
    """Poll until none of the job's nodes runs; the nodes then ({} when the job has no containers) and those
    stopped here. With
    ``stop_on_failure``, the others are stopped once a node failed and had its grace to report (the attached
    ``up``'s rule: :data:`ddpctl.local.executor.PEER_GRACE_S`)."""
    from ddpctl.local import executor

    deadline = None if timeout is None else time.monotonic() + timeout
    stop_at: float | None = None
    stopped: set[int] = set()
    while True:
        nodes = current_nodes(engine, name)
        running = [n for n, c in nodes.items() if c.running or c.state == "created"]
        if not running:
            return nodes, stopped
        if stop_on_failure and stop_at is None and any(
                not (c.running or c.state == "created") and c.exit_code not in (0, None) for c in nodes.values()):
            stop_at = time.monotonic() + executor.PEER_GRACE_S
        if stop_at is not None and time.monotonic() >= stop_at:
            for n in running:
                stopped.add(n)
                try:
                    engine.stop(nodes[n].id, 5)
                except Exception:  # noqa: BLE001 - gone meanwhile, or stopping: the next poll sees it
                    pass
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"job {name} still runs after {timeout} s")
        time.sleep(poll_s if left is None else max(0.0, min(poll_s, left)))


def node_outcome(engine: Engine, name: str, nodes: dict[int, ContainerInfo],
                 stopped: AbstractSet[int] = frozenset()) -> Outcome:
    """The outcome of a job whose nodes all exited (``stopped``: those stopped after the first failure): the
    root cause of a failure as the attached ``up`` names it, else whether the program said it finished."""
    import shlex

    from ddpctl.joboutput.lines import split_lines
    from ddpctl.local import executor
    from ddpctl.local.executor import attach, ending

    codes = {n: (c.exit_code if c.exit_code is not None else 1) for n, c in sorted(nodes.items())}
    failed = sorted((n for n, code in codes.items() if code != 0), key=lambda n: (n in stopped, n))
    if failed:
        found = []
        for n in failed:
            try:
                found.append(executor.node_failure(engine, n, nodes[n].id, codes[n], stopped=n in stopped))
            except Exception:  # noqa: BLE001 - the logs are gone: still name the node and its code
                found.append(executor.NodeFailure(n, codes[n], secondary=n in stopped))
        cause = executor.root_cause(found)
        failure = executor.failure_message(name, cause.node, cause.exit_code, nodes[cause.node], cause)
        return Outcome.of_failure(name, failure, codes, None, cause.rank)
    seen = executor.Outcome(dict(codes), None)
    for _, c in sorted(nodes.items()):
        try:
            for line in split_lines(engine.logs(c.id, tail=200)):
                attach.read_line(seen, executor.split_rank(line)[1])
        except Exception:  # noqa: BLE001 - removed meanwhile: judged on what was read
            pass
    not_done = ending.program_finished(name, list(nodes[min(nodes)].command), len(nodes), seen)
    if not_done is not None:
        return Outcome.of_failure(name, not_done, codes, seen.summary)
    return Outcome(name, 0, f"job {name} finished: all {len(nodes)} node(s) exited 0",
                   f"remove it with '{shlex.join(['ddpctl', 'down', name])}'", codes, seen.summary)


def kept_outcome(name: str) -> Outcome:
    """The outcome of a job that is gone, from its kept output."""
    from ddpctl.joboutput import kept_output, records
    from ddpctl.local import executor

    kept = kept_output.find(name)
    if kept is None:
        raise UsageError(f"no job {name}: no containers and no kept output in {kept_output.root()}",
                         "list jobs with ddpctl.jobs() or 'ddpctl ps --all'")
    codes = {int(n): int(c) for n, c in (kept.meta.get("exit_codes") or {}).items()
             if str(n).isdigit() and isinstance(c, int)}
    _, summary = records.collect(kept.texts())
    result = kept.meta.get("result")
    failed = sorted(n for n, c in codes.items() if c != 0)
    if result == "succeeded" and not failed:
        return Outcome(name, 0, f"job {name} finished: all {len(codes)} node(s) exited 0 (kept in {kept.folder})",
                       "", codes, summary)
    if failed:
        last = max((a for a, _ in kept.lines), default=0)
        texts = [t for _, t in kept.lines.get((last, failed[0]), [])]
        found = executor.parse_launch_failure(texts[-40:])
        cause = None if found is None else executor.NodeFailure(failed[0], codes[failed[0]], found[0], found[3])
        failure = executor.failure_message(name, failed[0], codes[failed[0]], None, cause)
        return Outcome.of_failure(name, failure, codes, summary)
    exc = JobFailed(f"job {name} was {result or 'stopped'} before it ended (kept in {kept.folder})",
                    "start it again")
    return Outcome.of_failure(name, exc, codes, summary)
