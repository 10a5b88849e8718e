"""The test suite's process helpers (tests/support/procs.py) end in bounded time when a child outlives its parent."""

from __future__ import annotations

import subprocess
import time

from procs import drain, kill_group


def test_drain_returns_what_was_written_when_a_child_holds_the_pipes():
    p = subprocess.Popen(["sh", "-c", "sleep 60 & echo before; exit 3"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.wait(timeout=30) == 3
        t0 = time.monotonic()
        out, err = drain(p, timeout=1)
        assert time.monotonic() - t0 < 10
        assert out == "before\n" and "held its pipes open" in err
    finally:
        kill_group(p)


def test_kill_group_ends_the_children_too():
    p = subprocess.Popen(["sh", "-c", "sleep 60 & echo started; wait"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline() == "started\n"
    kill_group(p)
    out, err = drain(p, timeout=10)  # the pipes close: no sleep is left holding them
    assert "held its pipes open" not in err and p.returncode == -9
