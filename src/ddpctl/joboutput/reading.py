"""A node's newest output, read within fixed bounds: ``status``, ``ps`` and ``plot`` read each node through
:func:`read_node`, whatever the job printed.

Each read asks the engine for the node's last ``tail`` lines and streams them through one
:class:`~ddpctl.joboutput.lines.LineSplitter` (lines cut at 64 KiB), stopping after :data:`NODE_READ_BYTES` or
:data:`NODE_READ_LINES`. A read that stopped there is made again for ten times fewer lines (the newest ones
matter: the last records, the last line's time), down to :data:`FEWEST_LINES`; so a node costs at most
``len(tails) x NODE_READ_BYTES`` bytes read, in time linear in them, and memory bounded by one read. Whatever was
not read or was cut is said in :meth:`NodeOutput.note`, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from ddpctl.joboutput.lines import MAX_LINE_BYTES, LineSplitter

if TYPE_CHECKING:
    from ddpctl.local.engine_interface import Engine

NODE_READ_BYTES = 16 * 2**20  # bytes of one node's output one read takes at most
NODE_READ_LINES = 200_000  # lines of one node's output one read takes at most
FEWEST_LINES = 10
LINES_WHEN_ALL = 100_000  # the first tail tried after a read of a whole output (tail None) stopped


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


LIMITS_TEXT = (f"at most {_mib(NODE_READ_BYTES)} or {NODE_READ_LINES:,} lines of each node's newest output "
               f"(lines cut at {_mib(MAX_LINE_BYTES)})")


@dataclass
class NodeOutput:
    """What one read of a node's output gave, and what it left out."""

    lines: list[str] = field(default_factory=list)
    read: int = 0  # bytes read
    cut_lines: int = 0  # lines cut at MAX_LINE_BYTES
    cut_bytes: int = 0
    stopped: bool = False  # the read stopped at its bound with more output to come
    tail: int | None = None  # the lines asked for

    def note(self, node: int) -> str | None:
        """One line saying what was left out, or None when nothing was."""
        said = []
        if self.stopped:
            window = "its output" if self.tail is None else f"its last {self.tail:,} lines"
            said.append(f"read only the first {len(self.lines):,} lines ({_mib(self.read)}) of {window} "
                        f"(the bound: {LIMITS_TEXT})")
        if self.cut_lines:
            said.append(f"{self.cut_lines} line(s) over {_mib(MAX_LINE_BYTES)} cut there "
                        f"({self.cut_bytes:,} bytes not shown)")
        return f"node {node}: " + "; ".join(said) if said else None


def read_chunks(chunks: Iterable[bytes], *, limit: int = NODE_READ_BYTES, max_lines: int = NODE_READ_LINES,
                newest: bool = False) -> NodeOutput:
    """The lines of ``chunks`` up to ``limit`` bytes and ``max_lines`` lines (the stream is closed there);
    ``newest``: read on to ``limit`` bytes, keeping the last ``max_lines`` lines (:attr:`NodeOutput.stopped`
    then says that older lines were dropped)."""
    from collections import deque

    splitter = LineSplitter()
    out = NodeOutput()
    kept: deque[str] = deque(maxlen=max_lines if newest else None)
    it = iter(chunks)
    try:
        for chunk in it:
            kept.extend(splitter.feed(chunk))
            if splitter.read >= limit or (len(kept) >= max_lines and not newest):
                out.stopped = next(it, None) is not None or splitter.read > limit or len(kept) > max_lines
                break
        else:
            kept.extend(splitter.finish())
        out.stopped = out.stopped or (newest and splitter.lines > max_lines)
    finally:
        close = getattr(chunks, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - an engine stream that cannot close cleanly is dropped anyway
                pass
    out.lines = list(kept)
    out.read, out.cut_lines, out.cut_bytes = splitter.read, splitter.cut_lines, splitter.cut_bytes
    return out


def tails(tail: int | None) -> list[int | None]:
    """The tails one node's read tries, the first one first: ``tail``, then ten times fewer each time."""
    out: list[int | None] = [tail]
    n = LINES_WHEN_ALL if tail is None else tail // 10
    while n >= FEWEST_LINES:
        out.append(n)
        n //= 10
    return out


def read_node(engine: Engine, cid: str, *, tail: int | None, limit: int = NODE_READ_BYTES,
              max_lines: int = NODE_READ_LINES, timestamps: bool = True) -> NodeOutput:
    """Node ``cid``'s newest output within the bounds (see the module's text); engine errors go up."""
    out = NodeOutput()
    for t in tails(tail):
        out = read_chunks(engine.logs(cid, tail=t, timestamps=timestamps), limit=limit, max_lines=max_lines)
        out.tail = t
        if not out.stopped:
            break
    return out
