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
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass

PREFIX_TEMPLATE = "rank-${rank} | "  # torchrun substitutes the worker's global rank
_HEADER = re.compile(r"rank-(\d+) \| ")
MAX_PARTIAL = 64 * 1024  # a line without newline longer than this is written out anyway
FAILURE_LINE = re.compile(r"^ddp-train-launch: rank (\d+) failed \(exit code (\d+)([^)]*)\)(?:: (.*))?$")

# An error line with one of these (lowercase) means the worker failed because a peer went away.
LOST_PEER_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "remote worker crashing",
    "remote process exited",
    "lost a peer",
    "distnetworkerror",
    "connection refused",
)
LOST_PEER_CODES = (128, 129)  # ddp-train: master unreachable, lost peer


def failure_exit_code(exitcode: int) -> int:
    """A worker's exit status as the container's exit code (negative = killed by that signal)."""
    if exitcode < 0:
        return 128 + (-exitcode)
    return exitcode if exitcode > 0 else 1


# The agent could not reach its peers' store or finish the rendezvous: the master is not up (yet) or went
# away. Retryable, like ddp-train's own "master unreachable" (128), so restartPolicy: ExitCode retries it.
AGENT_NETWORK_ERRORS = ("DistNetworkError", "DistStoreError", "RendezvousError", "RendezvousTimeoutError",
                        "RendezvousConnectionError", "RendezvousClosedError", "RendezvousStateError")
EXIT_AGENT_NETWORK = 128


def agent_error_exit_code(exc: BaseException) -> int:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & set(AGENT_NETWORK_ERRORS) or isinstance(exc, (ConnectionError, TimeoutError)):
        return EXIT_AGENT_NETWORK
    return 1


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class RankLines(io.TextIOBase):
    """Replaces ``sys.stdout``/``sys.stderr`` in the launcher: whole lines, one ``os.write`` each.

    torchrun's tail threads write ``rank-R | <text>``; text without a newline is kept (per thread) until
    the rest of its line arrives, and the header repeated on the continuation is dropped. Other writers
    (the launcher's own logging) get the same whole-line treatment without a rank prefix.
    """

    def __init__(self, fd: int, *, keep_last: bool = False) -> None:
        super().__init__()
        self._fd = fd
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[int | None, str]] = {}
        self._keep_last = keep_last
        self.last: dict[int, tuple[str, float]] = {}  # rank -> (last non-empty line, time it came)
        self.broken = False

    # io.TextIOBase
    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def flush(self) -> None:
        pass

    def write(self, s: str) -> int:
        if not s:
            return 0
        m = _HEADER.match(s)
        rank = int(m.group(1)) if m else None
        text = s[m.end():] if m else s
        tid = threading.get_ident()
        with self._lock:
            pending = self._pending.pop(tid, None)
            if pending is not None:
                if pending[0] == rank:
                    text = pending[1] + text
                else:
                    self._emit(*pending)
            *lines, rest = text.split("\n")
            for line in lines:
                self._emit(rank, line)
            if rest:
                if len(rest) >= MAX_PARTIAL:
                    self._emit(rank, rest)
                else:
                    self._pending[tid] = (rank, rest)
        return len(s)

    def finish(self) -> None:
        """Write out every line still waiting for its newline."""
        with self._lock:
            for rank, text in self._pending.values():
                self._emit(rank, text)
            self._pending.clear()

    def _emit(self, rank: int | None, line: str) -> None:
        line = line.rstrip("\r")
        if rank is not None:
            own = f"[rank{rank}]: "
            if line.startswith(own):
                line = line[len(own):]
            if self._keep_last and line.strip():
                self.last[rank] = (line.strip(), time.monotonic())
            data = f"rank-{rank} | {line}\n"
        else:
            data = line + "\n"
        if self.broken:
            return
        raw = data.encode("utf-8", "replace")
        try:
            while raw:
                raw = raw[os.write(self._fd, raw):]
        except OSError:  # the reader went away (stdout closed): keep the workers' lives independent of it
            self.broken = True


# c10d's C++ code writes its warnings and errors straight to fd 2, each with a C++ stack trace
_CPP_TRACE = re.compile(r"^(frame #\d+: |<omitting python frames>$|Exception raised from .*\(most recent call first\):$)")


class CppTraceFilter:
    """Routes fd 2 (where C++ writes, bypassing ``sys.stderr``) through ``sink`` without the stack traces.

    The one-line messages stay (``[E... TCPStore.cpp:...] [c10d] ... timed out``); the ``frame #N: ...``
    dumps after them go. ``sink`` must not write to fd 2 itself (it gets a duplicate of the real stderr).
    """

    def __init__(self, sink: RankLines, real_stderr: int) -> None:
        self._sink = sink
        self._real = real_stderr
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self._r = r
        self._thread = threading.Thread(target=self._pump, name="ddp-train-launch-fd2", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        buf = b""
        after_trace = False
        while True:
            try:
                chunk = os.read(self._r, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                if _CPP_TRACE.match(line) or (after_trace and not line.strip()):
                    after_trace = True
                    continue
                after_trace = False
                self._sink.write(line + "\n")
        if buf:
            self._sink.write(buf.decode("utf-8", "replace") + "\n")

    def close(self) -> None:
        """Put the real stderr back on fd 2 (the pipe's last writer goes) and wait for the rest."""
        os.dup2(self._real, 2)
        self._thread.join(timeout=5)
        os.close(self._r)


@dataclass(frozen=True)
class RankFailure:
    rank: int
    exit_code: int  # as the container reports it (128 + N for signal N)
    signal: str | None
    last_line: str
    lost_peer: bool
    at: float  # when its last error line came (monotonic), inf if none

    def line(self) -> str:
        notes = []
        if self.signal:
            notes.append(f"killed by {self.signal}")
        if self.lost_peer:
            notes.append("lost a peer")
        extra = "".join(f", {n}" for n in notes)
        return (f"ddp-train-launch: rank {self.rank} failed (exit code {self.exit_code}{extra}): "
                f"{self.last_line or '(no error output)'}")


def _looks_like_lost_peer(text: str) -> bool:
    low = text.lower()
    return any(m in low for m in LOST_PEER_MARKERS)


def root_cause(failures: dict, last: dict[int, tuple[str, float]]) -> RankFailure:
    """The failed rank to blame: not a lost peer if any, then the one whose error came first, then rank."""
    found = []
    for rank, failure in failures.items():
        rank = int(rank)
        text, at = last.get(rank, ("", float("inf")))
        if not text:
            msg = str(getattr(failure, "message", "") or "")
            if msg and not msg.startswith("To enable traceback"):
                text = msg.strip().splitlines()[-1] if msg.strip() else ""
        code = int(failure.exitcode)
        sig = _signal_name(-code) if code < 0 else None
        lost = (code in LOST_PEER_CODES or code == -signal.SIGTERM or _looks_like_lost_peer(text))
        found.append(RankFailure(rank, failure_exit_code(code), sig, text[:500], lost, at))
    # a rank the agent stopped (SIGTERM) after another failed says least; then the earliest error line
    found.sort(key=lambda f: (f.lost_peer, f.signal == "SIGTERM", f.at, f.rank))
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


# torchrun flags that take no value (every other flag before the training command takes one)
_NO_VALUE = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
             "--virtual-local-rank", "--virtual_local_rank", "-h", "--help"}


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
    args = _with_tee(args)
    from .threads import apply_for_launch

    apply_for_launch(args)
    os.environ.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", PREFIX_TEMPLATE)
    real_stderr = os.dup(2)
    out = RankLines(sys.stdout.fileno())
    err = RankLines(real_stderr, keep_last=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err  # before torch is imported: its log handlers write here
    cpp = CppTraceFilter(err, real_stderr)
    code = 0
    final = ""  # the one closing line, written after c10d's fd-2 messages are drained (they come first)
    try:
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.run import main as torchrun_main

        _quiet_torch_logging()
        try:
            torchrun_main(args)
        except ChildFailedError as exc:
            out.finish()
            err.finish()
            cause = root_cause(exc.failures, err.last)
            final = cause.line() + "\n"
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
