"""The kept output is never lost and never leaks: forged records, modes, links, bounds, strict JSON.

The engine here is a stand-in holding containers in memory (``keep`` asks it for containers and their logs
only): these tests are about the files ``keep`` writes and reads. The same paths on the real Docker Engine:
tests/integration/test_kept_output_job.py.
"""

import json
import os
import stat

import pytest

from ddpctl.joboutput import kept_files, kept_meta, kept_output
from ddpctl.local.engine_interface import ContainerInfo
from job_records import summary_line

FORGED = [
    '{"event": "progress", "step": 1, "rank": 0, "restart": "two", "time": 1.0}',  # a text restart
    '{"event": "progress", "step": 2, "rank": 0, "time": "late", "total": [1]}',  # mixed types
    '{"event": "progress", "step": 3, "rank": 0, "time": 2.0, "loss": ' + "9" * 400 + "}",  # a 400-digit number
    '{"event": "progress", "step": 4, "rank": 0, "x": ' + "[" * 5000 + "]" * 5000 + "}",  # deep nesting
    '{"event": "progress", "step": 5, "rank": 0, "samples_per_sec": NaN, "loss": Infinity}',
    '{"event": "summary", "images_per_sec": "fast", "exit_code": 0}',
    '{"event": "summary", "images_per_sec": ' + "1" * 400 + "}",
]


class Engine:
    def __init__(self):
        self.items = {}
        self.removed = []
        self.asks = []

    def add(self, cid, job, node, lines, *, state="exited", code=0, restarts=0, chunk=None):
        labels = {"ddpctl.job": job, "ddpctl.node-rank": str(node), "ddpctl.restarts": str(restarts)}
        info = ContainerInfo(cid, f"{job}-node-{node}", labels, state, None if state == "running" else code, 1000.0)
        self.items[cid] = (info, [f"2026-01-01T00:00:{i % 60:02d}.000000000Z {t}" for i, t in enumerate(lines)], chunk)

    def containers(self, label=None, name=None):
        key, _, value = (label or "").partition("=")
        return [c for c, _, _ in self.items.values() if not label or c.labels.get(key) == value]

    def logs(self, cid, *, timestamps=False, tail=None, **_):
        self.asks.append(tail)
        lines = self.items[cid][1] if tail is None else self.items[cid][1][-tail:] if tail else []
        data = ("\n".join(lines) + "\n").encode()
        size = self.items[cid][2] or len(data)
        for i in range(0, len(data), size):
            yield data[i:i + size]

    def networks(self, label=None, name=None):
        return []

    def volumes(self, label=None, name=None):
        return []

    def remove_container(self, cid):
        self.removed.append(cid)
        del self.items[cid]


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    return tmp_path / "ddpctl" / "jobs"


def strict_load(path):
    def no(word):
        raise AssertionError(f"{word} in {path}")

    return json.loads(path.read_text(), parse_constant=no)


def test_forged_records_never_stop_the_keep_and_meta_is_strict_json(state):
    e = Engine()
    e.add("a", "job", 0, ["hello", summary_line(images_per_sec=7.5), *FORGED, "bye"])
    folder = kept_output.keep_or_fail(e, "job", removing=True)
    meta = strict_load(folder / "meta.json")
    assert meta["job"] == "job" and meta["result"] == "succeeded" and meta["final_samples_per_sec"] == 7.5
    summary = strict_load(folder / "summary.json")  # the forged summaries after it are no summaries
    assert summary["event"] == "summary" and summary["images_per_sec"] == 7.5
    for line in (folder / "progress.jsonl").read_text().splitlines():
        strict_load_text = json.loads(line, parse_constant=lambda w: pytest.fail(w))
        assert strict_load_text["event"] == "progress"
    kept = kept_output.find("job")
    assert [t for _, t in kept.merged()][0] == "hello" and [t for _, t in kept.merged()][-1] == "bye"
    assert len(kept.merged()) == len(FORGED) + 3


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_folders_are_0700_and_files_0600_whatever_the_umask(state, umask):
    old = os.umask(umask)
    try:
        e = Engine()
        e.add("a", "job", 0, ["x", '{"event": "summary", "images_per_sec": 1.0}'])
        folder = kept_output.keep(e, "job")
    finally:
        os.umask(old)
    for p in [state.parent, state, folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), (p, oct(mode))


def test_an_older_wide_folder_is_narrowed(state):
    (state / "job" / "attempt-0").mkdir(parents=True)
    os.chmod(state / "job", 0o755)
    e = Engine()
    e.add("a", "job", 0, ["x"])
    kept_output.keep(e, "job")
    assert stat.S_IMODE((state / "job").stat().st_mode) == 0o700


def test_a_link_planted_for_the_job_folder_fails_the_keep_and_removes_nothing(state, tmp_path):
    from ddpctl.local.executor import remove_job

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state.mkdir(parents=True)
    (state / "job").symlink_to(elsewhere)
    e = Engine()
    e.add("a", "job", 0, ["secret"])
    with pytest.raises(kept_output.KeepFailed) as info:
        remove_job(e, "job")
    assert "symbolic link" in info.value.message and "its containers stay" in info.value.message
    assert "\n" not in info.value.message
    assert e.removed == [] and list(elsewhere.iterdir()) == []
    assert kept_output.find("job") is None and kept_output.all_kept() == []


def test_links_planted_for_files_are_replaced_never_written_through_or_read(state, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    e = Engine()
    e.add("a", "job", 0, ["first"])
    folder = kept_output.keep(e, "job")
    for name in ("meta.json", "progress.jsonl", "attempt-0/node-0.log"):
        (folder / name).unlink()
        (folder / name).symlink_to(victim)
    kept_output.keep(e, "job")
    assert victim.read_text() == "untouched"
    assert not any(p.is_symlink() for p in folder.rglob("*"))
    # read back: a link where a node's log belongs is skipped, never followed
    (folder / "attempt-0" / "node-1.log").symlink_to(victim)
    assert sorted(kept_output.find("job").lines) == [(0, 0)]


def test_the_temporary_files_of_a_killed_keep_are_swept_by_the_next(state):
    """A keep killed mid-write (SIGKILL: no ``finally`` runs) leaves its ``.<name>.<pid>.tmp`` files; the next
    keep of the job removes those whose process is gone and leaves a live writer's alone."""
    import signal
    import subprocess
    import sys

    e = Engine()
    e.add("a", "job", 0, ["x"])
    folder = kept_output.keep(e, "job")
    writer = (
        "import os, sys, time\n"
        "from ddpctl.joboutput import kept_files\n"
        "for sub in ('', 'attempt-0'):\n"
        "    fd = os.open(os.path.join(sys.argv[1], sub), os.O_RDONLY)\n"
        "    kept_files.AtomicFile(fd, 'node-0.log' if sub else 'progress.jsonl').write(b'half' * 1000)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        live = folder / ".meta.json.1.tmp"  # a writer that is still running (process 1 always is)
        live.write_text("in progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(20)
    left = sorted(p.name for p in folder.rglob(f"*.{proc.pid}.tmp"))
    assert left == [f".node-0.log.{proc.pid}.tmp", f".progress.jsonl.{proc.pid}.tmp"]
    kept_output.keep(e, "job")
    assert list(folder.rglob(f"*.{proc.pid}.tmp")) == []
    assert live.read_text() == "in progress"


def test_keep_removes_containers_only_after_the_keep(state):
    from ddpctl.local.executor import remove_job

    e = Engine()
    e.add("a", "job", 0, ["x"])
    assert remove_job(e, "job") == (1, 0, 0)
    assert kept_output.find("job").meta["removed"] is True


def test_a_node_log_keeps_its_last_bytes_as_whole_lines_streamed(state, monkeypatch):
    monkeypatch.setattr(kept_output, "NODE_LOG_BYTES", 1000)
    e = Engine()
    lines = [f"line {i:05d}" for i in range(3000)]
    e.add("a", "job", 0, lines, chunk=7)  # chunks that split lines anywhere
    folder = kept_output.keep(e, "job")
    data = (folder / "attempt-0" / "node-0.log").read_bytes()
    assert 900 < len(data) <= 1000 and data.endswith(b"line 02999\n")
    assert data.split(b"\n")[0].split(b" ", 1)[1].startswith(b"line ")  # starts at a whole line
    assert not [p for p in (folder / "attempt-0").iterdir() if p.name.startswith(".")]  # no temporary left
    # only the end is asked for: a probe of 1000 lines, then enough lines of that length to fill the cap
    assert e.asks[0] == 1000 and len(e.asks) == 1  # 1000 lines of 41 bytes fill 1000 bytes at once


def test_only_the_end_of_a_long_log_is_asked_for(state, monkeypatch):
    monkeypatch.setattr(kept_output, "NODE_LOG_BYTES", 200_000)
    e = Engine()
    lines = [f"line {i:07d}" for i in range(200_000)] + [summary_line(images_per_sec=5.0)]
    e.add("a", "job", 0, lines, chunk=65536)
    folder = kept_output.keep(e, "job")
    data = (folder / "attempt-0" / "node-0.log").read_bytes()
    assert 190_000 < len(data) <= 200_000 and b"line 0199999" in data
    assert e.asks[0] == 1000 and 4000 < e.asks[1] < 20_000 and len(e.asks) == 2, e.asks
    assert kept_output.find("job").meta["final_samples_per_sec"] == 5.0


@pytest.mark.parametrize("raw", [
    {"job": ["x"], "nodes": "2", "restarts": "1", "ended": "yesterday", "duration_s": float("nan"),
     "final_samples_per_sec": "fast", "hosts": "h", "exit_codes": {"0": "1", "x": 0}, "world_size": 10**400,
     "tensorboard": {"dir": 3}, "containers": [1], "state": {"a": 1}, "result": 7},
    [1, 2], "text", None, {"tensorboard": {"dir": "/tb", "container": None, "kept": 5}},
])
def test_meta_of_any_shape_reads_as_the_types_readers_expect(raw):
    meta = kept_meta.clean(raw)
    if not isinstance(raw, dict):
        assert meta == {}
        return
    assert meta["nodes"] == 0 and meta["restarts"] == 0 and meta["ended"] is None and meta["duration_s"] is None
    assert meta["final_samples_per_sec"] is None and meta["hosts"] == {} and meta["world_size"] is None
    assert meta["state"] == "exited" and meta["result"] is None and meta["exit_codes"] == {}
    tb = meta["tensorboard"]
    assert tb is None or (tb["container"] == "" and tb["kept"] is None)
    json.dumps(meta, allow_nan=False)


@pytest.mark.parametrize("text", ['{"job": 5, "result": []}', '{"nodes": ' + "9" * 400 + "}", "[" * 100000, "{not json", "\x00\xff",
                                  '{"ended": NaN, "result": "failed"}'])
def test_a_bad_meta_json_on_disk_reads_without_failing(state, text):
    (state / "job").mkdir(parents=True)
    (state / "job" / "meta.json").write_text(text, errors="surrogateescape")
    for k in kept_output.all_kept():
        json.dumps(k.meta, allow_nan=False)
    kept = kept_output.load(state / "job")
    assert kept is not None and isinstance(kept.meta, dict)
    assert not kept.meta or kept.meta["job"] == "job"


def test_strict_turns_non_finite_numbers_into_null():
    assert kept_files.dumps({"a": [float("inf"), float("nan"), 1.5]}) == '{"a": [null, null, 1.5]}'


def test_whole_lines_are_linear_bounded_and_cut_anywhere():
    from ddpctl.joboutput.kept_node import whole_lines

    data = b"a\r\nb\xff\nccc" + b"d" * 50 + b"\nend"
    for size in (1, 2, 7, 1000):
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        out = b"".join(whole_lines(iter(chunks), max_line=20))
        assert out.split(b"\n")[:2] == [b"a", "b\ufffd".encode()] and out.endswith(b"\nend\n")
        assert max(len(x) for x in out.split(b"\n")) <= 20 + size  # a long line comes in pieces


def test_the_engine_log_frames_are_cut_out_of_large_blocks():
    from ddpctl.dockerengine.log_stream import demultiplex

    frames = b"".join(bytes([1 + i % 2, 0, 0, 0]) + len(p).to_bytes(4, "big") + p
                      for i, p in enumerate([b"one\n", b"two\n", b"", b"x" * 100 + b"\n"]))
    for size in (1, 3, 9, 4096):
        blocks = [frames[i:i + size] for i in range(0, len(frames), size)]
        assert b"".join(demultiplex(iter(blocks))) == b"one\ntwo\n" + b"x" * 100 + b"\n"


def test_chunked_http_is_decoded_across_reads_of_any_size():
    import io

    from ddpctl.dockerengine.log_stream import dechunk

    payloads = [b"one\n", b"x" * 300, b"two;three\r\n", b"\r\n"]
    body = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in payloads) + b"0\r\n\r\n"
    for size in (1, 2, 5, 64, 10000):
        f = io.BytesIO(body)
        assert b"".join(dechunk(lambda n, f=f, size=size: f.read(min(n, size)))) == b"".join(payloads)
    with pytest.raises(OSError):
        list(dechunk(io.BytesIO(b"zz\r\nabc").read))


def test_status_and_plot_hold_only_the_newest_lines_of_a_kept_log_and_say_so(state):
    from ddpctl.watch import sources, status

    e = Engine()
    e.add("a", "job", 0, [f"line {i}" for i in range(50)] + [summary_line(images_per_sec=3.5)])
    kept_output.keep_or_fail(e, "job", removing=True)
    kept = kept_output.find("job", tail=10)
    assert [t for _, t in kept.merged()] == [f"line {i}" for i in range(41, 50)] + [summary_line(images_per_sec=3.5)]
    assert kept.cut == {(0, 0): 41}
    assert kept.notes() == ["node 0: read only the last 10 lines of its kept output of attempt 0 (41 older ones not read)"]
    assert len(kept_output.find("job").merged()) == 51 and kept_output.find("job").cut == {}  # logs: every line
    st = status.build(sources.job_view(None, "job", tail=10), 0.0)
    assert st["summary"]["images_per_sec"] == 3.5 and st["notes"] == kept.notes()
