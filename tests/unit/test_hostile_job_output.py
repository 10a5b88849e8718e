"""Hostile job output: a property test over what a job's processes may print (records with any JSON types, huge
and deep values, NaN/inf, control and escape characters, invalid UTF-8, NUL, lines with no newline, very long
lines, many lines), through ddpctl's one reader (joboutput.lines, joboutput.reading), ``status`` (text and
``--json``), the ``ps`` progress column, the line ``up`` and ``logs`` print, the live line of an attached ``up``,
``plot``, and the keep step (``down``: strict JSON metadata, the kept folder read back by ``logs`` and
``status``). Nothing raises, no control character the job printed reaches ddpctl's output (a tab in an output
line aside), ``--json`` is strict JSON, and however the bytes are chunked the lines are the same.

Real parts: the real splitter, record check, status builder, live line and matplotlib. No container runs here
(tests/integration/test_hostile_output_escapes.py prints such output from a real job).
Seeded (derandomize=True) and bounded; no deadline.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpctl.errors import UsageError
from ddpctl.joboutput import lines as lines_mod
from ddpctl.joboutput import live, reading
from ddpctl.joboutput.visible import has_control
from ddpctl.watch import plot, status
from job_records import summary

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("DDPCTL_HOSTILE_EXAMPLES", "200"))
SETTINGS = settings(derandomize=True, max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ESCAPES = ["\x1b]0;owned\x07", "\x1b[2J\x1b[H", "\x1b]52;c;aGk=\x1b\\", "\x9b31m", "\u202eevil", "\x00", "\x7f",
           "\r", "\x08\x08", "\x1bP+q\x1b\\", "\u2028", "\t", "$\\frac{a}{$", "é🙂", "%s{}"]
text_values = st.one_of(st.sampled_from(ESCAPES), st.text(max_size=12),
                        st.builds(lambda e, n: e * n, st.sampled_from(ESCAPES), st.integers(1, 1000)))
numbers = st.one_of(st.integers(-2**70, 2**70), st.floats(), st.sampled_from([10**400, -1, 0, 2**53, 1e308]))
json_any = st.recursive(st.none() | st.booleans() | numbers | text_values,
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_values, inner, max_size=3),
                        max_leaves=8)
KEYS = ["time", "step", "total", "rank", "world_size", "restart", "node", "host", "loss", "samples_per_sec",
        "step_time_s", "checkpoint", "epoch", "version", "event", "x"]
GOOD = {"event": "progress", "version": 1, "time": 1.7e9, "step": 10, "total": 100, "rank": 0, "world_size": 2,
        "restart": 0, "loss": 0.5, "samples_per_sec": 10.0, "host": "h", "node": 0, "checkpoint": None}


def deep(n: int) -> str:
    return '{"event": "progress", "x": ' + "[" * n + "]" * n + "}"


def record_text(changes: dict, kind: str) -> str:
    base = summary() if kind == "summary" else dict(GOOD)
    base.update(changes)
    return json.dumps(base)  # NaN/Infinity as Python writes them; 10**400 as its digits


record = st.builds(record_text, st.dictionaries(st.sampled_from(KEYS), json_any, max_size=4),
                   st.sampled_from(["progress", "progress", "summary"]))
short_text = st.one_of(st.sampled_from(ESCAPES), st.text(max_size=12))
good_record = st.builds(lambda step, rank, host, path, loss: json.dumps({
    **GOOD, "step": step, "rank": rank, "host": host, "loss": loss,
    "checkpoint": {"step": step, "path": path}}), st.integers(0, 200), st.integers(0, 3), short_text, short_text,
    st.floats(-1e18, 1e18))
good_summary = st.builds(lambda model, ckpt, steps: json.dumps(summary(model=model, checkpoint=ckpt, steps=steps)),
                         short_text, short_text | st.none(), st.integers(0, 2**53))
piece = st.one_of(
    record, good_record, good_record, good_record, good_summary, text_values.map(str),
    st.sampled_from([deep(10), deep(50_000), '{"event": "progress"' + ", 1" * 10, "rank-1 | ", "rank-99999999999 | x",
                     "ddp-train-launch: rank 0 failed (exit code 1): \x1b]0;x\x07boom", "at step " + "9" * 5000]),
)
prefixed = st.builds(lambda p, rank: (f"rank-{rank} | " if rank is not None else "") + p, piece,
                     st.none() | st.integers(0, 3))
encoded = prefixed.map(lambda s: s.encode("utf-8", "surrogatepass"))
raw_piece = st.one_of(encoded, encoded, encoded, encoded,
                      st.binary(max_size=40), st.sampled_from([b"\xff\xfe", b"\xc3", b"\x00" * 10, b"x" * 70_000]))
output = st.builds(
    lambda parts, seps, times: b"".join(p + s for p, s in zip(parts * times, seps * times, strict=False)),
    st.lists(raw_piece, min_size=1, max_size=25), st.lists(st.sampled_from([b"\n", b"\n", b"\n", b"\n", b"\r\n", b"", b"\n\n"]),
                                                           min_size=25, max_size=25),
    st.sampled_from([1, 1, 1, 2, 100]))


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


class Tty(io.StringIO):
    def isatty(self):
        return True


def job_view(text_lines: list[str], name: str) -> status.JobView:
    nodes = [status.NodeView(0, "running", None, 0, name + "-node-0", host=name, last_output=1.0)]
    return status.JobView(name, "docker", nodes=nodes, lines=text_lines, state="running")


@SETTINGS
@given(data=output, cuts=st.lists(st.integers(0, 10**9), max_size=6), name=text_values)
def test_hostile_output_never_breaks_ddpctl_nor_reaches_the_terminal(data, cuts, name):
    got = list(lines_mod.split_lines(chunked(data, cuts)))
    assert got == list(lines_mod.split_lines([data]))  # however the engine chunks it
    assert all(len(line.encode()) <= lines_mod.MAX_LINE_BYTES * 4 + 80 for line in got)

    st_dict = status.build(job_view(got, name), now=1.7e9 + 5)
    text = json.dumps(st_dict, allow_nan=False)  # strict JSON, or this raises
    assert json.loads(text)["job"] == name
    shown = status.text(st_dict) + [status.progress_cell(st_dict)]
    assert not any(has_control(line) for line in shown), [ln for ln in shown if has_control(ln)][:1]
    for r in st_dict["ranks"]:
        assert r["step"] >= 0 and (r["percent"] is None or r["percent"] >= 0)

    out = Tty()
    line = live.LiveLine.on(out, restarts=0)
    for text_line in got:
        if not live.consume(line, text_line):
            line.write(lines_mod.format_line(0, text_line, 14, False) + "\n")
    line.close()
    printed = out.getvalue().replace("\r\x1b[K", "").replace("\n", "")  # the live line's own redraw, line ends
    assert not has_control(printed, tab=True)


@settings(derandomize=True, max_examples=max(5, EXAMPLES // 10), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=output, name=text_values)
def test_hostile_output_is_plotted_or_refused_in_one_line(data, name):
    view = status.JobView(name, "kept", lines=list(lines_mod.split_lines([data])), result=name)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            notes = plot.draw([view], Path(tmp) / "p.png")
        except UsageError as exc:
            assert "no progress records to plot" in str(exc) and not has_control(str(exc))
            return
        assert (Path(tmp) / "p.png").stat().st_size > 0
        assert not any(has_control(n.replace(name, "")) for n in notes)


class ManyLines:
    """engine.logs over a job that printed ``n`` lines (a record every 1000th), made as they are asked for: the
    job's output is never held here, so what the reader holds is what it kept."""

    def __init__(self, n: int):
        self.n, self.asked = n, []

    def logs(self, cid, *, tail=None, timestamps=False, **_):
        self.asked.append(tail)
        start = 0 if tail is None else max(0, self.n - tail)

        def chunks():
            for first in range(start, self.n, 10_000):
                yield b"".join(json.dumps({**GOOD, "step": i}).encode() + b"\n" if i % 1000 == 0 else
                               b"line %d \x1b[2J\n" % i for i in range(first, min(self.n, first + 10_000)))
        return chunks()


def test_millions_of_lines_are_read_within_the_bounds_and_the_newest_records_win():
    engine = ManyLines(3_000_000)
    out = reading.read_node(engine, "c", tail=None)
    assert engine.asked == [None, 100_000] and len(out.lines) == 100_000 and not out.stopped
    st_dict = status.build(status.JobView("j", "docker", lines=out.lines, state="running"), now=1.7e9)
    assert st_dict["progress"]["step"] == 2_999_000 and st_dict["notes"] == []
    assert not any(has_control(line) for line in status.text(st_dict))
    first = reading.read_chunks(ManyLines(3_000_000).logs("c"), limit=reading.NODE_READ_BYTES)
    assert first.stopped and "read only the first 200,000 lines" in first.note(0)


class NoEngine:
    """A job that is gone: no container answers (``logs`` then reads its kept output)."""

    def containers(self, label=None, name=None):
        return []


@settings(derandomize=True, max_examples=max(5, EXAMPLES // 5), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=output, nodes=st.integers(1, 2))
def test_hostile_output_is_kept_in_strict_json_and_read_back_by_logs_and_status(data, nodes):
    from test_kept_output_safety import Engine

    from ddpctl.api import job_output
    from ddpctl.joboutput import kept_output
    from ddpctl.watch import sources

    got = list(lines_mod.split_lines([data]))
    engine = Engine()
    for n in range(nodes):
        engine.add(f"c{n}", "hostile", n, got, code=n)
    with tempfile.TemporaryDirectory() as tmp:
        before = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = tmp
        try:
            folder = kept_output.keep_or_fail(engine, "hostile", removing=True)
            assert folder is not None  # the keep never fails on what a job printed

            def strict(path: Path):
                return json.loads(path.read_text(), parse_constant=lambda word: pytest.fail(f"{word} in {path}"))

            meta = strict(folder / "meta.json")
            assert meta["job"] == "hostile" and meta["nodes"] == nodes
            if (folder / "summary.json").exists():
                strict(folder / "summary.json")
            for line in (folder / "progress.jsonl").read_text().splitlines():
                json.loads(line, parse_constant=lambda word: pytest.fail(word))
            said: list[str] = []
            shown = list(job_output.log_lines("hostile", NoEngine(), say=said.append))
            assert len(shown) <= len(got) * nodes and said and not any(has_control(s, tab=True) for s in shown)
            st_dict = status.build(sources.job_view(None, "hostile"), now=1.7e9)
            json.dumps(st_dict, allow_nan=False)
            assert not any(has_control(line) for line in status.text(st_dict))
        finally:
            if before is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = before
