"""The text of a node's output: ``rank-N | ...`` lines, the launcher's root-cause line, the prefixes.

ddp-train-launch (ddp_train.launcher.run) writes each worker line as "rank-<global rank> | <text>" and ends a
failure with one line naming the root-cause rank. Kept in step with ddp_train.launcher.run by a unit test
(ddpctl never imports ddp_train: the image's launcher and this parser meet only in the text).
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from ddpctl.joboutput.visible import visible
from ddpctl.launch.names import EXIT_CODE_LAUNCHER
from ddpctl.local.restarts import retryable

COLORS = ["\x1b[36m", "\x1b[33m", "\x1b[35m", "\x1b[32m", "\x1b[34m", "\x1b[31m"]
RESET = "\x1b[0m"

RANK_LINE = re.compile(r"^rank-(\d+) \| ")
LAUNCH_FAILURE = re.compile(r"^ddp-train-launch: rank (\d+) failed \(exit code (\d+)([^)]*)\)(?:: (.*))?$")
# ddp-train's own line for a retryable failure (ddp_train.__main__), e.g. a lost peer
RETRYABLE_ERROR = re.compile(r"^ddp-train: error: .*; retryable, restart the job \(exit code (\d+)\)$")
# The note the launcher's root-cause line carries for a lost peer or timeout (ddp_train.errors.LOST_PEER_TEXT)
LOST_PEER = "lost a peer"
PEER_GRACE_S = 5.0  # after a node that lost a peer exits, how long the others may take to report before a stop
LAUNCHER = EXIT_CODE_LAUNCHER  # ddp-train-launch; plain torchrun (a job started by an older ddpctl) does not prefix ranks


def split_rank(line: str) -> tuple[int | None, str]:
    """``rank-3 | text`` -> (3, "text"); a line not from a worker (the launcher's own) -> (None, line)."""
    m = RANK_LINE.match(line)
    if m:
        return int(m.group(1)), line[m.end():]
    return None, line


def peer_loss_line(line: str) -> bool:
    """Is ``line`` (a node's raw output line) a rank's or launcher's report of a retryable failure?"""
    found = LAUNCH_FAILURE.match(line)
    if found:
        return says_lost_peer(found.group(3) or "") or retryable(int(found.group(2)))
    return bool(RETRYABLE_ERROR.match(split_rank(line)[1]))


def says_lost_peer(notes: str) -> bool:
    """Do the notes of a launcher's root-cause line (``, lost a peer``) say the rank failed because a peer did?"""
    return LOST_PEER in notes


def label(node: int, rank: int | None) -> str:
    return f"node-{node}" if rank is None else f"node-{node} rank-{rank}"


def prefix(node: int, width: int, color: bool, rank: int | None = None) -> str:
    """``node-1 rank-3 | `` (worker lines) or ``node-1 | `` (the node's launcher), padded to ``width``."""
    text = label(node, rank).ljust(width) + " | "
    return f"{COLORS[node % len(COLORS)]}{text}{RESET}" if color else text


def format_line(node: int, line: str, width: int, color: bool, raw: bool = False) -> str:
    """A node's output line as ``up`` and ``logs`` print it: its prefix, then the text with control characters
    made visible (tabs kept), or as the job printed it with ``raw``."""
    rank, text = split_rank(line)
    return prefix(node, width, color, rank) + (text if raw else visible(text, tab=True))


def label_width(nodes: int, world_size: int) -> int:
    return len(label(max(nodes - 1, 0), max(world_size - 1, 0)))


def node_ranks(command: tuple[str, ...] | list[str]) -> range | None:
    """The global ranks a node runs, from its launcher's static-rendezvous flags (None if unknown)."""
    if not command or command[0].rsplit("/", 1)[-1] != LAUNCHER:
        return None
    flags: dict[str, str] = {}
    args = list(command[1:])
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--no-python":
        key, eq, value = args[i].partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
            value = args[i + 1]
            i += 1
        flags[key.replace("_", "-")] = value
        i += 1
    try:
        nproc, node = int(flags["--nproc-per-node"]), int(flags["--node-rank"])
    except (KeyError, ValueError):
        return None
    return range(node * nproc, (node + 1) * nproc)


def silent_ranks_line(node: int, expected: range | None, seen: set[int], *, window: bool = False) -> str | None:
    """One line naming the ranks of ``node`` that printed nothing, or None when every rank printed."""
    if expected is None:
        return None
    quiet = [r for r in expected if r not in seen]
    if not quiet:
        return None
    names = ", ".join(f"rank-{r}" for r in quiet)
    where = " in the lines selected" if window else ""
    if len(quiet) == len(expected):
        return f"node-{node}: its rank(s) {names} printed nothing{where}"
    return f"node-{node}: {names} printed nothing{where}"


def parse_launch_failure(lines: list[str]) -> tuple[int, int, str, str] | None:
    """(rank, exit code, notes, last error line) from the launcher's root-cause line, the last one wins."""
    for line in reversed(lines):
        m = LAUNCH_FAILURE.match(line)
        if m:
            return int(m.group(1)), int(m.group(2)), m.group(3) or "", m.group(4) or ""
    return None


MAX_LINE_BYTES = 64 * 1024  # a line longer than this is cut there, the rest counted and said in the line itself
READ_SLICE = 1 << 20  # a chunk is split in slices of this many bytes: no step works on more at once


class LineSplitter:
    """Bytes in, lines out, in time linear in the bytes fed: what it holds is at most :data:`MAX_LINE_BYTES`
    of the line being read. A longer line is cut at the cap and ends with ``[ddpctl: N more bytes of this line
    not shown]``; :attr:`cut_lines` and :attr:`cut_bytes` count them. Invalid UTF-8 becomes U+FFFD, a line's
    trailing CR is dropped; control characters stay (:mod:`ddpctl.joboutput.visible` shows them)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self.read = 0  # bytes fed
        self.lines = 0
        self.cut_lines = 0
        self.cut_bytes = 0
        self._parts: list[bytes] = []
        self._held = 0  # bytes in _parts
        self._over = 0  # bytes of this line past the cap, not kept

    def feed(self, chunk: bytes) -> Iterator[str]:
        if len(chunk) <= READ_SLICE:
            yield from self._feed(bytes(chunk))
            return
        for at in range(0, len(chunk), READ_SLICE):
            yield from self._feed(bytes(chunk[at:at + READ_SLICE]))

    def _feed(self, chunk: bytes) -> Iterator[str]:
        self.read += len(chunk)
        pieces = chunk.split(b"\n")  # one pass in C; a slice is at most READ_SLICE bytes
        rest = pieces.pop()
        for piece in pieces:
            if self._parts or self._over or len(piece) > self.max_line:
                self._hold(piece)
                yield self._line()
            else:
                self.lines += 1
                yield piece.rstrip(b"\r").decode("utf-8", "replace")
        self._hold(rest)

    def finish(self) -> Iterator[str]:
        """The last line, when the output did not end with a newline."""
        if self._parts or self._over:
            yield self._line()

    def _hold(self, piece: bytes) -> None:
        take = max(0, min(self.max_line - self._held, len(piece)))
        if take:
            self._parts.append(piece[:take])
            self._held += take
        self._over += len(piece) - take

    def _line(self) -> str:
        data = b"".join(self._parts)
        if self._over == 0:
            data = data.rstrip(b"\r")
        text = data.decode("utf-8", "replace")
        if self._over:
            self.cut_lines += 1
            self.cut_bytes += self._over
            text += f" [ddpctl: {self._over} more bytes of this line not shown]"
        self._parts, self._held, self._over = [], 0, 0
        self.lines += 1
        return text


def split_lines(chunks: Iterable[bytes], splitter: LineSplitter | None = None) -> Iterator[str]:
    """The lines of a byte stream (see :class:`LineSplitter`; pass one to read its counts afterwards)."""
    splitter = splitter or LineSplitter()
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.finish()
