"""An attached ``ddpctl up`` from start to end: start the job, supervise it, and whatever ends it, leave nothing
running that should not be.

- Ctrl-C, SIGTERM (treated as Ctrl-C) or a closed stdout (``ddpctl up ... | head``): every node is stopped and
  the job removed (containers, network, checkpoint volume), then :class:`Stopped` (exit 130, or 141 for a
  closed stdout); a second Ctrl-C during that clean-up is ignored;
- a restart that cannot create or start the nodes: the job is removed and the :class:`EngineError` raised;
- ``--rm``: the job is removed when it ends, whatever the end;
- a clean-up against an engine that does not answer gives up after :data:`CLEANUP_S` and says what is left.

The CLI (``ddpctl.cli.up``) only parses, calls :func:`start_job` and :func:`run_attached`, and prints.
"""

from __future__ import annotations

import shlex
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ddpctl.errors import EngineError
from ddpctl.local.engine_interface import Engine
from ddpctl.local.executor.attach import OutputClosed
from ddpctl.local.executor.common import Say, exc_reason, say_nothing
from ddpctl.local.executor.create import Job, remove_job
from ddpctl.local.executor.supervise import Finished, supervise

CLEANUP_S = 60.0  # the most a clean-up waits on an engine before it says what it left


class Stopped(Exception):
    """The job was stopped and removed on request (Ctrl-C, SIGTERM) or because stdout closed."""

    def __init__(self, exit_code: int, closed: bool) -> None:
        super().__init__("stdout closed" if closed else "interrupted")
        self.exit_code = exit_code
        self.closed = closed


@dataclass
class Started:
    job: Job
    seconds: float


def start_job(plan, engine: Engine, *, say: Say = say_nothing, resume: bool = False,
              host_gpus: int | None = None) -> Started:
    """Create and start the job (all or nothing) on one engine or, when ``engine.node_per_host``, on the Docker
    hosts it spans (each checked on its own). ``host_gpus``: the GPUs a job on this machine's engine may ask for
    (default: what nvidia-smi counts here, asked only for a GPU job)."""
    from ddpctl.local.executor.create import up
    from ddpctl.local.executor.several_hosts import up_hosts

    if host_gpus is None and not engine.node_per_host:
        from ddpctl.host_gpus import gpu_count

        host_gpus = gpu_count() if plan.wants_gpus else 0
    t0 = time.monotonic()
    if engine.node_per_host:
        job = up_hosts(plan, engine, say=say, resume=resume)
    else:
        job = up(plan, engine, host_gpus=host_gpus or 0, say=say, resume=resume)
    return Started(job, time.monotonic() - t0)


def _bounded(what: Callable[[], object], seconds: float) -> BaseException | None:
    """Run ``what`` in a thread for at most ``seconds``: None when it finished, else why not."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            what()
            box.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if not box:
        return TimeoutError(f"the engine did not answer within {seconds:.0f} s")
    return box[0]


def remove(job: Job, engine: Engine, say: Say, *, stop_first: bool = False) -> bool:
    """Stop (optionally) and remove the job; on an engine that does not answer, say what is left. True: done."""
    name = job.plan.job

    def work() -> None:
        if stop_first:
            for cid in list(job.ids.values()):
                try:
                    engine.stop(cid, 3)
                except Exception:  # noqa: BLE001 - the removal below forces it
                    pass
        remove_job(engine, name)

    why = _bounded(work, CLEANUP_S)
    from ddpctl.joboutput.kept_output import KeepFailed

    if isinstance(why, KeepFailed):
        say(why.message)  # the output could not be kept: the containers stay, and the line says what to do
        return False
    if why is not None:
        say(f"could not remove job {name} ({exc_reason(why)}); run '{shlex.join(['ddpctl', 'down', name])}' when the engine answers")
        return False
    return True


def run_attached(job: Job, engine: Engine, *, rm: bool = False, color: bool = False, out=None, say: Say = say_nothing,
                 argv: list[str] | None = None, wait_s: float | None = None) -> Finished:
    """Supervise ``job`` to its end (:func:`~.supervise.supervise`) with the clean-up rules above."""
    main = threading.current_thread() is threading.main_thread()

    def on_sigterm(signum, frame):  # treat like Ctrl-C
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_sigterm) if main else None
    old_int = signal.getsignal(signal.SIGINT) if main else None
    try:
        finished = supervise(job, engine, out=out, color=color, say=say, wait_s=wait_s, argv=argv)
    except (KeyboardInterrupt, OutputClosed) as exc:
        closed = isinstance(exc, OutputClosed)
        if main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        say(f"{'stdout closed' if closed else 'interrupted'}: stopping job {job.plan.job}")
        if remove(job, engine, say, stop_first=True):
            say(f"job {job.plan.job} stopped and removed")
        raise Stopped(141 if closed else 130, closed) from None
    except EngineError as exc:  # a restart could not create or start the nodes
        if remove(job, engine, say):
            exc.problem += "; the job was removed"
        raise
    finally:
        if main and old is not None:
            signal.signal(signal.SIGTERM, old)
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
    if rm and finished.outcome.lost is None:
        remove(job, engine, say)
    return finished
