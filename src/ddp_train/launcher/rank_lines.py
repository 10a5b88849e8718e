"""Whole output lines for the launcher: ``RankLines`` (every worker line written whole, with its rank prefix)
and ``CppTraceFilter`` (c10d's C++ stack traces on fd 2 dropped, its one-line messages kept)."""

from __future__ import annotations

import io
import os
import re
import threading
import time

PREFIX_TEMPLATE = "rank-${rank} | "  # torchrun substitutes the worker's global rank
HEADER = re.compile(r"rank-(\d+) \| ")
MAX_PARTIAL = 64 * 1024  # a line without newline longer than this is written out anyway


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
        m = HEADER.match(s)
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
        # a worker's lines pass as the worker wrote them (its colours, a progress bar's carriage returns): they
        # are the job's own output; whoever shows them to a terminal escapes them (ddpctl does), and the
        # launcher's own diagnostics that quote them (the root-cause line) escape what they quote
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
