"""The one reader of a job's output (ddpctl.joboutput): the line splitter (linear, lines cut at 64 KiB and the
cut said), bounded reads of a node (reading), control characters made visible (visible)."""

from __future__ import annotations

import pytest

from ddpctl.joboutput import lines, reading
from ddpctl.joboutput.visible import has_control, visible


def split(chunks, **kw):
    sp = lines.LineSplitter(**kw)
    return list(lines.split_lines(chunks, sp)), sp


def test_lines_are_the_same_however_the_bytes_are_chunked():
    data = b"a\r\nbb\n\nc\xff\xfed\ne" + "é🙂\n".encode() + b"last"
    whole, _ = split([data])
    assert whole == ["a", "bb", "", "c\ufffd\ufffdd", "e" + "é🙂", "last"]
    for size in (1, 2, 3, 7):
        assert split([data[i:i + size] for i in range(0, len(data), size)])[0] == whole


def test_a_line_over_the_cap_is_cut_there_and_the_cut_is_said_and_counted():
    got, sp = split([b"x" * 100, b"y" * 50 + b"\nshort\n" + b"z" * 300], max_line=64)
    assert got[0] == "x" * 64 + " [ddpctl: 86 more bytes of this line not shown]"
    assert got[1] == "short" and got[2].startswith("z" * 64) and "236 more bytes" in got[2]
    assert (sp.cut_lines, sp.cut_bytes, sp.lines, sp.read) == (2, 86 + 236, 3, 457)


def test_a_huge_chunk_of_many_lines_and_one_endless_line():
    got, sp = split([b"ab\n" * 1_000_000])
    assert len(got) == 1_000_000 and got[-1] == "ab" and sp.cut_lines == 0
    got, sp = split(iter([b"q" * (3 << 20)] * 4))  # 12 MiB with no newline: held at 64 KiB
    assert len(got) == 1 and len(got[0]) < lines.MAX_LINE_BYTES + 80 and sp.cut_bytes == (12 << 20) - (64 << 10)


class Stream:
    """An engine's log stream: chunks, and close() as docker-py's stream has."""

    def __init__(self, chunks):
        self.chunks, self.closed, self.taken = iter(chunks), False, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.taken += 1
        return next(self.chunks)

    def close(self):
        self.closed = True


class LogsEngine:
    """engine.logs(cid, tail=N) over lines held in memory (the real engine: tests/integration)."""

    def __init__(self, lines_out):
        self.lines, self.asked = lines_out, []

    def logs(self, cid, *, tail=None, timestamps=False, **_):
        self.asked.append(tail)
        picked = self.lines if tail is None else self.lines[-tail:]
        return Stream(line + b"\n" for line in picked)


def test_a_read_stops_at_its_bound_closes_the_stream_and_says_so():
    s = Stream([b"a\n" * 10] * 100)
    out = reading.read_chunks(s, limit=50, max_lines=10**6)
    assert out.stopped and s.closed and out.read == 60 and s.taken < 10
    assert "read only the first 30 lines (60 bytes) of its output" in out.note(2) and out.note(2).startswith("node 2: ")
    full = reading.read_chunks(Stream([b"a\nb"]), limit=50)
    assert full.lines == ["a", "b"] and not full.stopped and full.note(0) is None


def test_a_node_read_that_stops_is_made_again_for_fewer_newest_lines():
    engine = LogsEngine([b"%d" % i + b"x" * 1000 for i in range(5000)])
    out = reading.read_node(engine, "c", tail=5000, limit=200_000)
    assert engine.asked == [5000, 500, 50] and out.tail == 50 and not out.stopped
    assert out.lines[-1].startswith("4999") and len(out.lines) == 50
    engine = LogsEngine([b"p"] * 30)
    assert reading.read_node(engine, "c", tail=None).lines == ["p"] * 30 and engine.asked == [None]
    assert reading.tails(None)[:3] == [None, 100_000, 10_000] and reading.tails(5)[-1] == 5


def test_newest_keeps_the_last_lines_and_says_older_ones_were_dropped():
    out = reading.read_chunks([b"%d\n" % i for i in range(100)], max_lines=10, newest=True)
    assert out.lines == [str(i) for i in range(90, 100)] and out.stopped


@pytest.mark.parametrize("text, shown", [
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
    ("\x1b]52;c;aGk=\x1b\\", "\\x1b]52;c;aGk=\\x1b\\"),  # the clipboard write
    ("a\x00b\x7fc\x9bd", "a\\x00b\\x7fc\\x9bd"),
    ("abc\u202edef\u2066", "abc\\u202edef\\u2066"),
    ("x\ry\nz\u2028", "x\\x0dy\\x0az\\u2028"),
    ("tab\there", "tab\\x09here"),
    ("plain é 🙂 \\x1b", "plain é 🙂 \\x1b"),
])
def test_control_characters_are_shown_as_text(text, shown):
    assert visible(text) == shown and not has_control(visible(text))
    assert has_control(text) is (text != shown)


def test_tabs_can_stay_and_non_text_values_are_shown_too():
    assert visible("a\tb\x1b", tab=True) == "a\tb\\x1b" and visible(7) == "7" and visible(None) == "None"


def test_the_live_line_text_never_fails_on_nan_infinity_or_a_negative_step():
    from ddpctl.joboutput import live

    nan, inf = float("nan"), float("inf")
    text = live.describe({"step": 5, "total": 10, "percent": nan, "samples_per_sec": inf, "eta_s": nan}, 1)
    assert text == "progress: step 5/10, - samples/s, ETA -, 1 restart(s)"
    text = live.describe({"step": -5, "total": 10, "percent": -50.0, "samples_per_sec": None, "eta_s": -inf}, 0)
    assert "-50" not in text and "ETA -" in text


def test_the_help_of_status_ps_and_plot_states_the_bounds_the_reader_keeps():
    from ddpctl.cli import cluster, watch
    from ddpctl.watch import sources

    bound = f"{reading.NODE_READ_BYTES // 2**20} MiB or {reading.NODE_READ_LINES:,} lines"
    for command in (watch.status_cmd, cluster.ps, watch.plot_cmd):
        text = " ".join(command.__doc__.split())
        assert bound in text, command.__name__
    for command in (watch.status_cmd, cluster.ps):
        assert f"last {sources.STATUS_TAIL} lines" in " ".join(command.__doc__.split())
    assert f"{lines.MAX_LINE_BYTES // 1024} KiB" in " ".join(watch.status_cmd.__doc__.split())
    assert f"last {sources.FILE_READ_BYTES // 2**20} MiB" in " ".join(watch.plot_cmd.__doc__.split())
