"""Whole, rank-prefixed lines: ddp-train-launch's writer (``RankLines``) and ddpctl's reading of its output.

``RankLines`` is exercised with real threads and a real pipe (what the launcher's stdout is in a container);
the end-to-end behaviour under real torchrun agents is in tests/distributed/test_launcher_output.py.
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

from ddp_train.launcher import rank_lines
from ddp_train.launcher import run as launcher
from ddpctl.local import executor


def _pipe_writer(keep_last: bool = False):
    r, w = os.pipe()
    return r, w, rank_lines.RankLines(w, keep_last=keep_last)


def _read_all(r: int) -> str:
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks).decode()


def test_partial_lines_from_several_threads_come_out_whole():
    r, w, out = _pipe_writer()

    def tail(rank: int) -> None:  # what torchrun's tailer does: header + whatever readline() returned
        for i in range(20):
            out.write(f"rank-{rank} | line {i} of rank {rank} ")
            time.sleep(0.001)
            out.write(f"rank-{rank} | part two {i}\n")

    threads = [threading.Thread(target=tail, args=(rank,)) for rank in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.write("a launcher line without rank\n")
    out.finish()
    os.close(w)
    lines = _read_all(r).splitlines()
    assert len(lines) == 81
    for line in lines[:-1]:
        rank, text = executor.split_rank(line)
        assert rank is not None, line
        i = text.split()[1]
        assert text == f"line {i} of rank {rank} part two {i}", line
    assert lines[-1] == "a launcher line without rank"


def test_torch_rank_prefix_dropped_last_error_line_kept_and_unfinished_line_flushed():
    r, w, err = _pipe_writer(keep_last=True)
    err.write("rank-3 | [rank3]: Traceback (most recent call last):\n")
    err.write("rank-3 | [rank3]: ValueError: boom\n\n")
    err.write("rank-1 | no newline yet")
    err.finish()
    os.close(w)
    assert _read_all(r).splitlines() == ["rank-3 | Traceback (most recent call last):", "rank-3 | ValueError: boom",
                                         "rank-3 | ", "rank-1 | no newline yet"]
    assert err.last[3][0] == "ValueError: boom" and err.last[1][0] == "no newline yet"


def test_a_ranks_lines_pass_as_written_and_its_last_line_note_too():
    """A worker's own output (colours, a bar's carriage return, a tab) passes through the rank-prefixed line as
    the worker wrote it: it is the job's output, and whoever shows it on a terminal escapes it (ddpctl does).
    Only the launcher's own diagnostics that quote it (the root-cause line, next test) escape what they quote."""
    r, w, err = _pipe_writer(keep_last=True)
    err.write("rank-0 | \x1b[32mgreen\x1b[0m tab\there\r\n")
    err.write("rank-0 | 50%|#####     |\r\n")
    err.finish()
    os.close(w)
    lines = _read_all(r).splitlines()
    assert lines == ["rank-0 | \x1b[32mgreen\x1b[0m tab\there", "rank-0 | 50%|#####     |"]


def test_the_root_cause_line_shows_the_ranks_text_escaped_and_bounded():
    evil = "\x1b]0;pwned\x07\x1b[2J" + "A" * 5000
    cause = launcher.root_cause({0: _failure(3)}, {0: (evil, 1.0)})
    line = cause.line()
    assert line.startswith("ddp-train-launch: rank 0 failed (exit code 3): \\x1b]0;pwned\\x07\\x1b[2JAAA")
    assert "\x1b" not in line and "\x07" not in line and len(line) <= launcher.FAILURE_LINE_MAX
    assert line.endswith("...")
    # ddpctl still reads it: the rank, the code and the (escaped) text
    rank, code, notes, text = executor.parse_launch_failure([line])
    assert (rank, code, notes) == (0, 3, "") and text.startswith("\\x1b]0;pwned")
    # torchrun's own record of the failure (no line seen from the rank) is foreign text too
    from_record = launcher.root_cause({1: _failure(1, "Traceback...\nValueError: \x1b[2Jgone")}, {}).line()
    assert from_record == "ddp-train-launch: rank 1 failed (exit code 1): ValueError: \\x1b[2Jgone"


def test_a_closed_reader_does_not_break_the_launcher():
    r, w, out = _pipe_writer()
    os.close(r)
    out.write("rank-0 | lost\n")  # EPIPE (SIGPIPE is ignored by Python)
    assert out.broken
    out.write("rank-0 | still fine\n")
    os.close(w)


def _failure(code: int, message: str = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"):
    return SimpleNamespace(exitcode=code, message=message)


def test_root_cause_takes_the_program_code_of_a_rank_stopped_after_its_program_failed():
    last = {0: ("RuntimeError: [pair.cc:553] Connection closed by peer [10.0.0.2]:1234", 1.0),
            1: ("ValueError: boom on rank 1", 0.5)}
    failures = {0: SimpleNamespace(exitcode=1, message="", pid=100, timestamp=1000),
                1: SimpleNamespace(exitcode=-15, message="", pid=101, timestamp=1000)}
    cause = launcher.root_cause(failures, last, {}, {101: (1, 999.5), 100: (1, 999.6)})
    assert cause.line() == "ddp-train-launch: rank 1 failed (exit code 1): ValueError: boom on rank 1"
    # without its note the agent's SIGTERM is all that is known: the lost peer's rank stays the cause
    assert launcher.root_cause(failures, last).rank == 0
    # a program that had finished well and was stopped while leaving is not the cause
    assert launcher.root_cause(failures, last, {}, {101: (0, 999.5)}).rank == 0
    # a note of a program that ended long before (an earlier restart's process under the same pid) is not taken
    assert launcher.root_cause(failures, last, {}, {101: (1, 100.0)}, exit_bound=300).rank == 0


def test_root_cause_prefers_a_rank_that_did_not_lose_a_peer():
    last = {0: ("RuntimeError: [pair.cc:553] Connection closed by peer [10.0.0.2]:1234", 1.0),
            3: ("ValueError: boom on rank 3", 2.0)}
    cause = launcher.root_cause({0: _failure(1), 3: _failure(1)}, last)
    assert (cause.rank, cause.exit_code, cause.lost_peer) == (3, 1, False)
    assert cause.line() == "ddp-train-launch: rank 3 failed (exit code 1): ValueError: boom on rank 3"
    only_peer = launcher.root_cause({0: _failure(1)}, last)
    assert only_peer.line().startswith("ddp-train-launch: rank 0 failed (exit code 1, lost a peer): RuntimeError")
    killed = launcher.root_cause({2: _failure(-9)}, {})
    assert killed.line() == "ddp-train-launch: rank 2 failed (exit code 137, killed by SIGKILL): (no error output)"
    # ddp-train's own lost-peer exit code, and the earliest error among equals
    assert launcher.root_cause({1: _failure(129), 2: _failure(4)}, {}).rank == 2
    assert launcher.root_cause({1: _failure(1), 2: _failure(1)}, {1: ("A", 5.0), 2: ("B", 4.0)}).rank == 2


def test_ddpctl_reads_what_the_launcher_writes():
    # the two sides meet only in text: keep the formats in step
    assert executor.RANK_LINE.pattern == "^" + rank_lines.HEADER.pattern
    assert executor.LAUNCH_FAILURE.pattern == launcher.FAILURE_LINE.pattern
    line = launcher.RankFailure(5, 1, None, "KeyError: 'x'", False, 0.0).line()
    assert executor.parse_launch_failure(["noise", line, "rank-1 | later"]) == (5, 1, "", "KeyError: 'x'")
    peer = launcher.RankFailure(0, 129, None, "lost", True, 0.0).line()
    assert executor.parse_launch_failure([peer])[2] == ", lost a peer"
    # the failure contract (ddp_train.errors) as ddpctl reads it: the lost-peer note and the retryable codes
    from ddp_train import errors
    from ddpctl.joboutput import lines
    from ddpctl.local import restarts

    assert lines.LOST_PEER == errors.LOST_PEER_TEXT and lines.says_lost_peer(executor.parse_launch_failure([peer])[2])
    assert restarts.RETRYABLE_MIN == errors.RETRYABLE_MIN
    assert executor.peer_loss_line(peer) and not executor.peer_loss_line(line)


def test_labels_and_silent_ranks():
    assert executor.format_line(1, "rank-3 | hi | there", 14, False) == "node-1 rank-3  | hi | there"
    assert executor.format_line(1, "torchrun warning", 14, False) == "node-1         | torchrun warning"
    assert executor.label_width(2, 4) == len("node-1 rank-3")
    argv = ("ddp-train-launch", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", "1", "--master-addr",
            "n0", "--no-python", "python", "x.py", "--node-rank", "7")
    assert executor.node_ranks(argv) == range(2, 4)
    assert executor.node_ranks(("ddp-train-launch", "--nproc_per_node=4", "--node_rank=2", "x.py")) == range(8, 12)
    assert executor.node_ranks(("torchrun", "--nproc-per-node", "4", "--node-rank", "2", "x.py")) is None
    assert executor.node_ranks(("python", "x.py")) is None
    assert executor.silent_ranks_line(1, range(2, 4), {2, 3}) is None
    assert executor.silent_ranks_line(1, range(2, 4), {2}) == "node-1: rank-3 printed nothing"
    assert executor.silent_ranks_line(1, range(2, 4), set(), window=True) == \
        "node-1: its rank(s) rank-2, rank-3 printed nothing in the lines selected"


def test_job_root_cause_skips_nodes_that_failed_because_of_another():
    nf = executor.NodeFailure
    first_but_peer = nf(0, 1, 0, "Connection closed by peer", secondary=True)
    real = nf(1, 1, 3, "ValueError: boom")
    assert executor.root_cause([first_but_peer, real]) is real
    assert executor.root_cause([first_but_peer]) is first_but_peer
    msg = executor.failure_message("j", 1, 1, None, real).message
    assert msg.startswith("node 1 (j-node-1) of job j failed: rank 3 exited with code 1: ValueError: boom; see ")


def test_tee_is_added_unless_torchrun_flags_ask_for_their_own(monkeypatch):
    monkeypatch.delenv("PET_TEE", raising=False)
    monkeypatch.delenv("PET_REDIRECTS", raising=False)
    plain = ["--nnodes", "2", "--standalone", "--no-python", "python", "x.py", "--tee", "9"]
    assert launcher._with_tee(plain) == ["--tee", "3", *plain]  # x.py's own --tee is not torchrun's
    for own in (["--nnodes", "2", "--tee", "1", "x.py"], ["--redirects=3", "x.py"], ["-t", "2", "x.py"]):
        assert launcher._with_tee(own) == own
    monkeypatch.setenv("PET_TEE", "1")
    assert launcher._with_tee(plain) == plain
