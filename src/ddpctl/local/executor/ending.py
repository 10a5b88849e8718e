"""How an attached job ended, in one line: the failures that are no node's own (a Docker Engine or host that
went away, a run that exited 0 without saying it finished) and the command that resumes the job.

Exit codes (docs/cli.md's table): a node's failure is that node's code (:func:`~.attach.failure_message`);
an engine or host that went away and ended the job is :data:`EXIT_ENGINE_LOST`; nodes that all exited 0 without
the program saying it finished is 1.
"""

from __future__ import annotations

import shlex

from ddpctl.errors import JobFailed
from ddpctl.local import restarts
from ddpctl.local.engine_interface import Engine
from ddpctl.local.executor.attach import Outcome
from ddpctl.local.executor.common import exc_reason
from ddpctl.local.executor.create import Job, remove_job

EXIT_ENGINE_LOST = 69  # sysexits' EX_UNAVAILABLE: a Docker Engine or host went away and the job could not go on
RESUME_FLAG = "--resume"
_NO_RUN = {"--help", "-h", "--version", "compare"}  # ddp-train commands that train nothing and print no summary


def resume_argv(argv: list[str] | None, job: Job, *, removed: bool = False) -> list[str] | None:
    """``ddpctl up ...`` (``argv``, as the user typed it) that continues ``job`` from its checkpoints
    (``--resume`` added after ``up``), or the same command again when the job keeps no checkpoints."""
    if not argv:
        return None
    words = list(argv)
    keeps = job.plan.containers and job.plan.containers[0].restart_argv is not None and not removed
    if keeps and RESUME_FLAG not in words and "up" in words:
        words.insert(words.index("up") + 1, RESUME_FLAG)
    return ["ddpctl", *words]


def _again(argv: list[str] | None, job: Job, *, removed: bool = False) -> str:
    # --rm removes the job as it ends, its checkpoint volume too (a directory of the user's stays)
    removed = removed or ("--rm" in (argv or []) and bool(job.plan.checkpoint_volume))
    words = resume_argv(argv, job, removed=removed)
    if not words:
        return ""
    if RESUME_FLAG in words:
        return f"resume it from its last checkpoint with: {shlex.join(words)}"
    if job.plan.containers and job.plan.containers[0].restart_argv is not None:
        return f"its checkpoints went with it (--rm): run it again with: {shlex.join(words)}"
    return f"no checkpoints are kept without --max-restarts: run it again with: {shlex.join(words)}"


def _step(outcome: Outcome, job: Job) -> str:
    step = outcome.step if outcome.step is not None else job.step
    return f" at step {step}" if step is not None else ""


def engine_lost(job: Job, engine: Engine, outcome: Outcome, argv: list[str] | None) -> JobFailed:
    """The engine (or a host) did not come back: remove the job where the engines answer, say what is left."""
    lost = outcome.lost
    assert lost is not None
    several = len(engine.endpoints()) > 1
    what = f"Docker host {lost.endpoint}" if several else f"the Docker Engine at {lost.endpoint}"
    waited = f"did not come back within {lost.waited_s:.0f} s" if lost.waited_s else "keeps failing"
    text = f"job {job.plan.job} stopped{_step(outcome, job)}: {what} went away ({lost.reason[:160]}) and {waited}"
    removed = ""
    if several:
        others = tuple(e for e in engine.endpoints() if e != lost.endpoint)
        try:
            n_c, _, _ = remove_job(engine.only(others), job.plan.job)
            removed = f"; its {n_c} container(s) on the other host(s) were removed"
        except Exception as exc:  # noqa: BLE001 - say what could not be removed
            removed = f"; removing it from the other host(s) failed too ({exc_reason(exc)[:120]})"
    hosts = ["--docker-hosts", ",".join(engine.endpoints())] if several else []
    fix = f"when it is back, '{shlex.join(['ddpctl', 'down', job.plan.job, *hosts])}' removes what is left there"
    again = _again(argv, job, removed=bool(several and job.volume))
    exc = JobFailed(text + removed, fix + (f", or {again}" if again else ""))
    exc.exit_code = EXIT_ENGINE_LOST
    return exc


def engine_stopped_nodes(job: Job, outcome: Outcome, node_line: str, argv: list[str] | None,
                         *, restarts_used: bool) -> JobFailed:
    """The engine came back, but its going away stopped the nodes and no restart is left."""
    where, away = outcome.outages[-1]
    last = (f" after its last allowed restart ({job.restarts} of --max-restarts {job.plan.max_restarts})"
            if restarts_used else "")
    text = (f"job {job.plan.job} stopped{_step(outcome, job)}{last}: the Docker Engine at {where} went away for "
            f"{away:.1f} s and stopped its nodes ({node_line})")
    again = _again(argv, job)
    exc = JobFailed(text, again or f"remove the job with '{shlex.join(['ddpctl', 'down', job.plan.job])}'")
    exc.exit_code = EXIT_ENGINE_LOST
    return exc


def said_finished(job: Job, outcome: Outcome) -> JobFailed | None:
    """None when the program said it finished (ddp-train: its summary record with exit code 0; another
    program: every node exited 0 with every line read), else the one line why the job did not finish."""
    argv = list(job.plan.containers[0].argv) if job.plan.containers else []
    return program_finished(job.plan.job, argv, len(job.ids), outcome, job.step)


def program_finished(name: str, argv: list[str], nodes: int, outcome: Outcome, step: int | None = None) -> JobFailed | None:
    """:func:`said_finished` for a job known by its name, its nodes' argv and their count (a job found by its
    labels, as ``ddpctl.Job.wait`` finds one)."""
    at = restarts.ddp_train_at(argv)
    if at is None or _NO_RUN & set(argv[at + 1:at + 2] + [a for a in argv[at + 1:] if a.startswith("-")]):
        return None
    summary = outcome.summary
    if summary is not None and summary.get("exit_code", 0) == 0:
        return None
    n = nodes
    at_step = outcome.step if outcome.step is not None else step
    at_step_text = f" at step {at_step}" if at_step is not None else ""
    if summary is None:
        why = (f"all {n} node(s) of job {name} exited 0{at_step_text}, but ddp-train printed no "
               "summary record, so the run did not finish")
    else:
        why = (f"ddp-train's summary record of job {name} says exit code {summary.get('exit_code')} "
               f"(sync check: {summary.get('sync_check')})")
    exc = JobFailed(why, f"see '{shlex.join(['ddpctl', 'logs', name, '--node', '0'])}'")
    exc.exit_code = 1
    return exc
