"""``ddp-train-launch``: torchrun with whole, rank-prefixed output lines and one root-cause line.

It runs torchrun's own ``main`` in-process (same flags, same ``PET_*`` environment) and adds three things:

- **Rank-prefixed output.** Unless the command line asks for its own ``--tee``/``--redirects``, every
  worker's stdout and stderr are teed by torchrun (``--tee 3``: to a file, then tailed) with the line
  prefix ``rank-<global rank> | `` (``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE``). torchrun's tailer can hand
  over half a line (it reads up to the end of the file while a worker is still writing); here every line
  is assembled whole and written with one ``write()``, so two ranks never share a line. torch's own
  ``[rankN]: `` prefix on exception tracebacks is dropped (the line already names its rank).
- **The root-cause worker's exit code.** torchrun exits 1 whenever a worker fails, whatever the worker's
  own code was. Kubernetes ``restartPolicy: ExitCode`` (PyTorchJob) restarts a pod only for exit codes
  >= 128, so behind plain torchrun every failure looks permanent and ddp-train's retryable codes (lost peer,
  timeout: >= 128) never reach the operator. Here the launcher exits with the root-cause worker's code; a
  worker killed by signal N gives 128 + N, as a shell would report it.
- **One line instead of launcher tracebacks.** A failure ends with one line on stderr,
  ``ddp-train-launch: rank R failed (exit code C[, lost a peer]): <the rank's last error line>``, instead of
  torchrun's ChildFailedError table; a stop by signal and an agent error are one line each too (an agent
  that cannot reach the store or finish the rendezvous exits 128, retryable, like ddp-train's "master
  unreachable"; any other agent error 1), and the C++ stack traces c10d writes to fd 2 are dropped (its
  one-line messages stay). The root cause among several failed ranks is a rank whose error is not a lost
  peer (a worker whose collective failed because another one died), the earliest such.

It also applies ddp-train's NCCL socket rule (:mod:`ddp_train.comm.socket_transport`, ``DDP_TRAIN_NCCL_SOCKETS=auto``) to its
own environment before torchrun starts, so every worker, ddp-train or a user's script, inherits it.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from dataclasses import dataclass

from ddp_train.errors import (
    AGENT_NETWORK_ERRORS,
    EXIT_HUNG,
    EXIT_MASTER_UNREACHABLE,
    LOST_PEER_CODES,
    LOST_PEER_TEXT,
    TrainError,
    looks_like_lost_peer,
)
from ddp_train.launcher.exits import TORCHRUN_NO_VALUE, ExitWatch, exit_timeout, wrap_command
from ddp_train.launcher.rank_lines import PREFIX_TEMPLATE, CppTraceFilter, RankLines
from ddp_train.visible import visible

FAILURE_LINE_MAX = 400  # characters of the root-cause line (the rank's last error line is cut to fit)
FAILURE_LINE = re.compile(r"^ddp-train-launch: rank (\d+) failed \(exit code (\d+)([^)]*)\)(?:: (.*))?$")

def failure_exit_code(exitcode: int) -> int:
    """A worker's exit status as the container's exit code (negative = killed by that signal)."""
    if exitcode < 0:
        return 128 + (-exitcode)
    return exitcode if exitcode > 0 else 1


def agent_error_exit_code(exc: BaseException) -> int:
    names = {cls.__name__ for cls in type(exc).__mro__}
    # The agent could not reach its peers' store or finish the rendezvous: the master is not up (yet) or went
    # away. Retryable, like ddp-train's own "master unreachable", so restartPolicy: ExitCode retries it.
    if names & set(AGENT_NETWORK_ERRORS) or isinstance(exc, (ConnectionError, TimeoutError)):
        return EXIT_MASTER_UNREACHABLE
    return 1


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


@dataclass(frozen=True)
class RankFailure:
    rank: int
    exit_code: int  # as the container reports it (128 + N for signal N)
    signal: str | None
    last_line: str
    lost_peer: bool
    at: float  # when its last error line came (monotonic), inf if none
    hung: bool = False  # its program ended but the process did not exit in time (the exit watch killed it)

    def line(self) -> str:
        notes = []
        if self.signal:
            notes.append(f"killed by {self.signal}")
        if self.lost_peer:
            notes.append(LOST_PEER_TEXT)
        extra = "".join(f", {n}" for n in notes)
        head = f"ddp-train-launch: rank {self.rank} failed (exit code {self.exit_code}{extra}): "
        # the rank's own text: control characters as escapes, the whole line at most FAILURE_LINE_MAX long
        said = visible(self.last_line or "(no error output)", tab=True, limit=max(40, FAILURE_LINE_MAX - len(head)))
        return head + said


def root_cause(failures: dict, last: dict[int, tuple[str, float]], hung: dict | None = None,
               programs_ended: dict[int, tuple[int, float]] | None = None, exit_bound: float = 300.0) -> RankFailure:
    """The failed rank to blame: not a lost peer if any, then one that failed rather than one that did not exit
    after its program ended (``hung``: ranks the exit watch killed, exits.ExitWatch), then the one whose error
    came first, then rank. ``programs_ended`` (pid -> the program's exit code and when it ended,
    exits.ExitWatch): a worker the agent stopped with SIGTERM after its program had failed counts with its
    program's code (the peer that lost the connection to it may have exited first, and the agent then stops the
    rest); a note that ended more than ``exit_bound`` seconds before the failure was recorded is another
    process's (an earlier restart's, under a reused pid) and is not taken."""
    hung = hung or {}
    programs_ended = programs_ended or {}
    found = []
    for rank, failure in failures.items():
        rank = int(rank)
        text, at = last.get(rank, ("", float("inf")))
        if not text:
            msg = str(getattr(failure, "message", "") or "")
            if msg and not msg.startswith("To enable traceback"):
                text = msg.strip().splitlines()[-1] if msg.strip() else ""
        code = int(failure.exitcode)
        program_code, ended = programs_ended.get(int(getattr(failure, "pid", -1) or -1), (0, 0.0))
        recorded = float(getattr(failure, "timestamp", 0) or 0)
        if code == -signal.SIGTERM and program_code and (not recorded or recorded - ended <= exit_bound + 60):
            code = program_code  # its program had failed before the agent stopped the process
        sig = _signal_name(-code) if code < 0 else None
        if rank in hung and code == -signal.SIGKILL:
            found.append(RankFailure(rank, EXIT_HUNG, None, text[:500], False, at, hung=True))
            continue
        lost = (code in LOST_PEER_CODES or code == -signal.SIGTERM or looks_like_lost_peer(text))
        found.append(RankFailure(rank, failure_exit_code(code), sig, text[:500], lost, at))
    # a rank the agent stopped (SIGTERM) after another failed says least; then the earliest error line
    found.sort(key=lambda f: (f.lost_peer, f.hung, f.signal == "SIGTERM", f.at, f.rank))
    return found[0]


class _OneLineTracebacks(logging.Filter):
    """On the launcher's log handlers: drop torchrun's per-worker failure dumps (the root-cause line
    replaces them) and turn logged tracebacks into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        if msg.startswith("failed (exitcode") or "FAILED with no error file" in msg:
            return False
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {first})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_torch_logging() -> None:
    flt = _OneLineTracebacks()
    loggers = [logging.getLogger()] + [lg for name, lg in logging.Logger.manager.loggerDict.items()
                                       if name.startswith("torch") and isinstance(lg, logging.Logger)]
    for lg in loggers:
        for handler in lg.handlers:
            handler.addFilter(flt)


_NO_VALUE = TORCHRUN_NO_VALUE  # torchrun flags that take no value (exits.py)


def _has_flag(argv: list[str], *flags: str) -> bool:
    """Is one of torchrun's own flags given before the training command (whose flags are its own)?"""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            return False  # the training script / command
        key = arg.split("=", 1)[0]
        if key in flags:
            return True
        i += 1 if "=" in arg or key in _NO_VALUE else 2
    return False


def _with_tee(argv: list[str]) -> list[str]:
    if _has_flag(argv, "-t", "--tee", "-r", "--redirects") or os.environ.get("PET_TEE") \
            or os.environ.get("PET_REDIRECTS"):
        return argv
    return ["--tee", "3", *argv]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if _has_flag(args, "-h", "--help"):
        from torch.distributed.run import main as torchrun_main

        torchrun_main(args)
        return 0
    try:
        bound = exit_timeout()  # before anything is set up: a bad value leaves nothing behind
    except TrainError as exc:
        print(f"ddp-train-launch: error: {exc}", file=sys.stderr, flush=True)
        return exc.code
    args = wrap_command(_with_tee(args))  # a Python worker ends its process group before teardown (worker.py)
    from ddp_train.runtime.threads import apply_for_launch

    apply_for_launch(args)
    os.environ.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", PREFIX_TEMPLATE)
    from ddp_train.comm.socket_transport import apply as apply_socket_rule

    apply_socket_rule()  # DDP_TRAIN_NCCL_SOCKETS=auto: NCCL socket settings for every worker (socket_transport.py)
    real_stderr = os.dup(2)
    out = RankLines(sys.stdout.fileno())
    err = RankLines(real_stderr, keep_last=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err  # before torch is imported: its log handlers write here
    cpp = CppTraceFilter(err, real_stderr)
    code = 0
    watch = ExitWatch(bound).start()  # bounds the time from the end of a worker's program to its exit (exits.py)
    final = ""  # the one closing line, written after c10d's fd-2 messages are drained (they come first)
    try:
        from ddp_train.runtime.startup import import_modules

        import_modules("torch.distributed.run")  # torch, with the collector paused (startup.py)
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.run import main as torchrun_main

        _quiet_torch_logging()
        from ddp_train.runtime.round_store import apply as publish_store_address_every_round

        publish_store_address_every_round()  # a recreated pod rejoins at once (round_store.py)
        try:
            torchrun_main(args)
        except ChildFailedError as exc:
            out.finish()
            err.finish()
            try:
                watch.check()  # the notes of programs that ended since the watch last looked
            except Exception:  # noqa: BLE001 - without them the line is torchrun's view, still true
                pass
            cause = root_cause(exc.failures, err.last, watch.hung, watch.programs_ended, watch.timeout)
            final = (watch.line(cause.rank, cause.exit_code) if cause.hung else cause.line()) + "\n"
            code = cause.exit_code
        except SignalException as exc:
            num = int(exc.sigval)
            final = f"ddp-train-launch: stopped by {_signal_name(num)}; the workers were stopped\n"
            code = 128 + num
        except Exception as exc:  # noqa: BLE001 - one line instead of the agent's traceback
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            code = agent_error_exit_code(exc)
            final = f"ddp-train-launch: error: {type(exc).__name__}: {first} (exit code {code})\n"
    finally:
        watch.close()
        out.finish()
        cpp.close()
        if final:
            err.write(final)
        err.finish()
        sys.stdout, sys.stderr = saved
        os.close(real_stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
