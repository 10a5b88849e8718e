"""Run an attached job to its end, restarting it after retryable node failures (``up --max-restarts N``).

One attempt is :func:`~ddpctl.local.executor.attach.attach` (stream, stop the rest at the first failure),
then the root cause (:func:`~ddpctl.local.executor.attach.job_root_cause`) decides: a retryable exit code
(>= 128) with restarts left recreates every node (:func:`~ddpctl.local.executor.create.restart`) and says so
in one line; a permanent one (< 128), or a failure after the last allowed restart, ends the job with one
line naming the root cause. The rules are in :mod:`ddpctl.local.restarts`.

A Docker Engine that went away and came back (a daemon restart stops every container) is a node loss like any
other: a restart when one is left, else one line with the step reached and the command that resumes the job
(:mod:`.ending`). One that did not come back ends the job at once. Nodes that all exited 0 still fail the job
when the program did not say it finished (ddp-train's summary record).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ddpctl.errors import JobFailed
from ddpctl.launch import job_label
from ddpctl.local.engine_interface import Engine
from ddpctl.local.executor import ending
from ddpctl.local.executor.attach import Outcome, attach, failure_message, job_root_cause
from ddpctl.local.executor.common import Say, say_nothing
from ddpctl.local.executor.create import Job, restart
from ddpctl.local.executor.stream import EngineWatch
from ddpctl.local.restarts import retryable

SETTLE_S = 1.5  # how long nodes that all died together wait for their daemon to show it is stopping


@dataclass
class Finished:
    outcome: Outcome  # of the last attempt
    failure: JobFailed | None  # None: every node exited 0 and the program said it finished
    restarts: int


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _engines_still_there(job: Job, engine: Engine, outcome: Outcome, say: Say, wait_s: float | None,
                         watch: EngineWatch) -> None:
    """Nodes that died together may have died with their engine: a daemon that is stopping (a restart, an
    upgrade) stops every container, still answering on the connections it has, and only then goes away. So the
    engines of the failed nodes are asked on a new connection; one that does not answer is waited for (an
    outage, :attr:`Outcome.outages`) or, gone for good, ends the job (:attr:`Outcome.lost`)."""
    from ddpctl.local.executor.attach import Lost, describe_engine
    from ddpctl.local.executor.stream import await_engine, engine_wait_s

    wait = engine_wait_s() if wait_s is None else wait_s
    if len(outcome.stopped) == 0 and all(retryable(c) for c in outcome.codes.values()):
        time.sleep(SETTLE_S)  # every node died of its own, together: give a stopping daemon time to go
    broke = {name: when for name, when, _ in watch.breaks()}
    names = []
    for node, code in outcome.codes.items():
        if retryable(code):
            try:
                name = engine.endpoint(job.ids[node])
            except Exception:  # noqa: BLE001
                name = engine.name
            if name not in names:
                names.append(name)
    for name in names:
        away = await_engine(engine, name, "it did not answer after the nodes stopped", wait_s=wait, say=say,
                            describe=describe_engine(engine), fresh=True)
        if away is None:
            outcome.lost = Lost(name, "it did not answer after the nodes stopped", wait)
            return
        if name in broke and away == 0:  # its event stream broke: it went away, and is back already
            away = time.monotonic() - broke[name]
            say(f"{describe_engine(engine)(name)} went away (its event stream broke) and answers again after {away:.1f} s")
        if away > 0:
            outcome.outages.append((name, away))


def supervise(job: Job, engine: Engine, *, out=None, color: bool = False, say: Say = say_nothing,
              wait_s: float | None = None, argv: list[str] | None = None) -> Finished:
    """Attach to ``job`` until it succeeds or fails for good; ``say`` gets the one line of each restart and
    of each engine outage. ``argv``: the ``ddpctl`` command line, for the command that resumes the job."""
    watch = EngineWatch(engine, job_label(job.plan.job))
    try:
        return _supervise(job, engine, out=out, color=color, say=say, wait_s=wait_s, argv=argv, watch=watch)
    finally:
        watch.close()


def _supervise(job: Job, engine: Engine, *, out, color: bool, say: Say, wait_s: float | None,
               argv: list[str] | None, watch: EngineWatch) -> Finished:
    plan = job.plan
    while True:
        left = plan.max_restarts - job.restarts
        outcome = attach(job, engine, out=out, color=color, mute_after=retryable if left > 0 else None, say=say,
                         wait_s=wait_s, watch=watch)
        if outcome.step is not None:
            job.step = max(job.step or 0, outcome.step)
        if outcome.lost is None and any(retryable(c) for c in outcome.codes.values()):
            _engines_still_there(job, engine, outcome, say, wait_s, watch)
        if outcome.lost is not None:
            return Finished(outcome, ending.engine_lost(job, engine, outcome, argv), job.restarts)
        if outcome.first_failure is None:
            return Finished(outcome, ending.said_finished(job, outcome), job.restarts)
        cause = job_root_cause(job, engine, outcome)
        node = cause.node if cause else outcome.first_failure
        code = outcome.codes[node]
        failure = failure_message(plan.job, node, code, engine.inspect(job.ids[node]), cause)
        node_line = failure.problem
        if plan.max_restarts and not retryable(code):
            failure.problem += " (a permanent exit code, below 128: not restarted)"
        elif plan.max_restarts and left <= 0:
            failure.problem = (f"job {plan.job} failed after its last allowed restart "
                               f"({job.restarts} of --max-restarts {plan.max_restarts}): {failure.problem}")
        if failure.fix and plan.checkpoint_volume and plan.max_restarts:
            failure.fix += f" (its checkpoints go with it: volume {plan.checkpoint_volume})"
        if retryable(code) and left > 0 and any(engine.inspect(cid) is None for cid in job.ids.values()):
            failure.problem = f"job {plan.job} was removed while it ran ('ddpctl down'): not restarted"
            failure.fix = ""
            left = 0
        elif outcome.outages and retryable(code) and left <= 0:
            failure = ending.engine_stopped_nodes(job, outcome, node_line, argv, restarts_used=plan.max_restarts > 0)
        if not retryable(code) or left <= 0:
            failure.args = (failure.message,)
            return Finished(outcome, failure, job.restarts)
        why = failure.problem
        if outcome.outages:
            where, away = outcome.outages[-1]
            why = f"the Docker Engine at {where} went away for {away:.1f} s and stopped the nodes ({why})"
        say(f"restart {job.restarts + 1}/{plan.max_restarts}: {why}; restarting all "
            f"{_plural(len(job.ids), 'node')}, training resumes from the last checkpoint")
        restart(job, engine)
