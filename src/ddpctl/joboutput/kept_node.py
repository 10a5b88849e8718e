"""A node's output streamed into its kept file: bytes and lines pass through, never all of them in memory.

:class:`Tail` keeps the last bytes of a node's output on disk, :class:`Records` what its records say; both in
time linear in what the node printed and memory bounded whatever it printed.
"""

from __future__ import annotations

import json
import os
import shutil

from ddpctl.joboutput import kept_files, kept_meta
from ddpctl.joboutput import records as rec_mod

MAX_LINE = 1 << 20  # bytes of one kept line read back for its record (a longer one is no record)


class Tail:
    """The last ``cap`` bytes (whole lines) of what :meth:`add` is given, on disk in two rolling segments of at
    most ``cap`` bytes each: memory and disk stay bounded whatever the job printed."""

    def __init__(self, dir_fd: int, name: str, cap: int) -> None:
        self.dir_fd, self.name, self.cap = dir_fd, name, cap
        self.segments: list[kept_files.AtomicFile] = [kept_files.AtomicFile(dir_fd, f"{name}.0")]
        self.size = self.rolled = 0

    def add(self, data: bytes) -> None:
        if self.size and self.size + len(data) > self.cap:
            if len(self.segments) == 2:
                self.segments.pop(0).discard()
            self.rolled += 1
            self.segments.append(kept_files.AtomicFile(self.dir_fd, f"{self.name}.{self.rolled % 3}"))
            self.size = 0
        if len(data) > self.cap:  # its last whole lines that fit (or the end of one longer line)
            start = data.find(b"\n", len(data) - self.cap - 1) + 1
            data = data[start:] if start < len(data) else data[-self.cap:]
        self.segments[-1].write(data)
        self.size += len(data)

    def finish(self) -> None:
        for seg in self.segments:
            seg.file.flush()
        with kept_files.AtomicFile(self.dir_fd, self.name) as out:
            need = self.cap - self.size
            if len(self.segments) == 2 and need > 0:
                with open(self.segments[0].tmp, "rb", opener=self._opener) as f:
                    start = max(0, f.seek(0, os.SEEK_END) - need)
                    f.seek(start)
                    if start:
                        f.readline()  # a whole line or none
                    shutil.copyfileobj(f, out.file)
            with open(self.segments[-1].tmp, "rb", opener=self._opener) as f:
                shutil.copyfileobj(f, out.file)
        self.discard()

    def discard(self) -> None:
        for seg in self.segments:
            seg.discard()

    def _opener(self, path: str, flags: int) -> int:
        return os.open(path, flags | os.O_NOFOLLOW, dir_fd=self.dir_fd)


class Records:
    """What a node's lines say, gathered while they stream: every progress record written to progress.jsonl (in
    the order each node printed them), the newest summary, and each rank's last records (for the final rate)."""

    MAX_RANKS = 4096

    def __init__(self, out: kept_files.AtomicFile) -> None:
        self.out, self.count, self.summary = out, 0, None
        self.ranks: dict[int, rec_mod.RankProgress] = {}

    def add(self, text: str) -> None:
        if "{" not in text:
            return
        try:
            rec = rec_mod.parse_event(text, "progress")
            if rec is not None:
                line = kept_files.dumps(rec, separators=(",", ":")).encode("utf-8") + b"\n"
                rank = rec.get("rank", 0)
                if rank in self.ranks or len(self.ranks) < self.MAX_RANKS:
                    rp = self.ranks.setdefault(rank, rec_mod.RankProgress(rank))
                    rp.records = rp.records[-rec_mod.ETA_WINDOW:] + [rec]
                self.out.write(line)
                self.count += 1
                return
            s = rec_mod.parse_event(text, "summary")
            if s is not None:
                self.summary = json.loads(kept_files.dumps(s))  # strict, and proven to serialize
        except (ValueError, TypeError, RecursionError, OverflowError):
            pass  # a record that cannot be read back or written: a plain line of the log

    def final_rate(self) -> float | None:
        rate = (self.summary or {}).get("images_per_sec")
        try:
            if rate is None:
                prog = rec_mod.job_progress(self.ranks)
                rate = prog["samples_per_sec"] if prog else None
        except (TypeError, ValueError, KeyError, ArithmeticError):
            rate = None
        return kept_meta.clean({"final_samples_per_sec": rate})["final_samples_per_sec"]


def whole_lines(chunks, max_line: int = MAX_LINE):
    """Blocks of whole lines (each ending in a newline) from ``chunks`` cut anywhere: a line's ``\\r\\n`` made
    ``\\n``, invalid UTF-8 replaced; a line longer than ``max_line`` comes in pieces (each at most ``max_line`` and
    one chunk). Linear: each
    byte is copied a bounded number of times, and the line not ended yet is the only thing carried over."""
    carry = b""
    for chunk in chunks:
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        if not cut:
            if len(data) < max_line:
                carry = data
                continue
            data, cut = data + b"\n", len(data) + 1
        carry = data[cut:]
        yield _clean(data[:cut])
    if carry:
        yield _clean(carry + b"\n")


def batched(chunks, size: int = 1 << 20):
    """``chunks`` (an Engine's log stream: a line each, mostly) joined into blocks of about ``size`` bytes."""
    parts, have = [], 0
    for chunk in chunks:
        parts.append(chunk)
        have += len(chunk)
        if have >= size:
            yield b"".join(parts)
            parts, have = [], 0
    if parts:
        yield b"".join(parts)


def _clean(block: bytes) -> bytes:
    return block.replace(b"\r\n", b"\n").decode("utf-8", "replace").encode("utf-8")


PROBE_LINES = 1000  # lines asked for first, to learn how long the node's lines are
MAX_ASKS = 6


def keep_node(engine, cid: str, attempt_fd: int, name: str, recs: Records, cap: int) -> None:
    """Node ``cid``'s last ``cap`` bytes (whole lines) streamed into ``name``, then its records through ``recs``.

    Only the end of the log is asked for (``tail``): the Engine reads a log from its end, so the time does not
    grow with what the node printed before its last ``cap`` bytes (reading a 1 GB log whole took the Engine
    40 s on the 2-core machine). A first small ask tells the lines' length; the next asks for enough lines to
    fill ``cap``, four times more each time it falls short."""
    want = PROBE_LINES
    for ask in range(MAX_ASKS):
        tail = Tail(attempt_fd, name, cap)
        try:
            lines = size = 0
            for block in whole_lines(batched(engine.logs(cid, timestamps=True, tail=want))):
                tail.add(block)
                lines += block.count(b"\n")
                size += len(block)
            complete = lines < want or size >= cap or ask == MAX_ASKS - 1
            if complete:
                tail.finish()
                break
        except BaseException:
            tail.discard()
            raise
        tail.discard()
        enough = int(cap / max(size / max(lines, 1), 1) * 1.25) + PROBE_LINES  # lines of that length fill cap
        want = enough if ask == 0 else max(want * 4, enough)
    read_node(attempt_fd, name, recs)


def read_node(attempt_fd: int, name: str, recs: Records) -> None:
    """A kept log read back through ``recs`` (a block of lines at a time)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=attempt_fd)
    except OSError:
        return
    with open(fd, "rb") as f:
        for block in whole_lines(iter(lambda: f.read(1 << 20), b"")):
            if b'"event"' in block:  # only a line that may be a record is looked at alone
                for line in block.split(b"\n"):
                    if b'"event"' in line:
                        recs.add(line.decode("utf-8").partition(" ")[2])
