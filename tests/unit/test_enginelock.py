"""The test run's engine lock (tests/support/enginelock.py), with real processes and real flock: shared holders run
together, an exclusive holder runs alone, a pending exclusive request is not starved by new shared ones, and
``exclusively()`` returns to the shared lock it came from."""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import time

import pytest

from enginelock import EngineLock

WAIT = 20  # seconds: the deadline of every wait below
NOT_YET = 0.3  # seconds to watch for what must not happen (a lock given too early)


def _hold(directory, mode, started, release, log, name):
    lock = EngineLock(directory)
    getattr(lock, mode)()
    log.put((name, "got", time.monotonic()))
    started.set()
    assert release.wait(WAIT), f"{name}: never told to release"
    log.put((name, "released", time.monotonic()))
    lock.release()


def _start(ctx, directory, mode, log, name):
    started, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold, args=(directory, mode, started, release, log, name), daemon=True)
    p.start()
    return p, started, release


def _events(log, n):
    return [log.get(timeout=WAIT) for _ in range(n)]


def _wait_until_gate_closed(directory) -> None:
    fd = os.open(directory / "gate", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
            time.sleep(0.02)
        raise AssertionError(f"the exclusive request did not close the gate within {WAIT} s")
    finally:
        os.close(fd)


@pytest.fixture
def ctx():
    return mp.get_context("fork")


def test_shared_holders_overlap_and_an_exclusive_one_waits_for_them(tmp_path, ctx):
    log = ctx.Queue()
    a, a_started, a_release = _start(ctx, tmp_path, "shared", log, "a")
    b, b_started, b_release = _start(ctx, tmp_path, "shared", log, "b")
    assert a_started.wait(WAIT) and b_started.wait(WAIT), "two shared holders did not both get the lock"
    x, x_started, x_release = _start(ctx, tmp_path, "exclusive", log, "x")
    assert not x_started.wait(NOT_YET), "the exclusive request got the lock while shared holders had it"
    a_release.set()
    b_release.set()
    assert x_started.wait(WAIT), "the exclusive request never got the lock after the shared holders left"
    x_release.set()
    for p in (a, b, x):
        p.join(WAIT)
        assert p.exitcode == 0


def test_a_pending_exclusive_request_goes_before_later_shared_ones(tmp_path, ctx):
    log = ctx.Queue()
    a, a_started, a_release = _start(ctx, tmp_path, "shared", log, "a")
    assert a_started.wait(WAIT), "the shared holder did not get the lock"
    x, x_started, x_release = _start(ctx, tmp_path, "exclusive", log, "x")
    _wait_until_gate_closed(tmp_path)  # x waits for the lock, holding the gate
    c, c_started, c_release = _start(ctx, tmp_path, "shared", log, "c")
    assert not c_started.wait(NOT_YET), "a new shared holder overtook the pending exclusive request"
    a_release.set()
    assert x_started.wait(WAIT), "the exclusive request never got the lock"
    assert not c_started.is_set()
    x_release.set()
    assert c_started.wait(WAIT), "the later shared request never got the lock"
    c_release.set()
    order = [(name, what) for name, what, _ in sorted(_events(log, 6), key=lambda e: e[2])]
    assert order == [("a", "got"), ("a", "released"), ("x", "got"), ("x", "released"), ("c", "got"),
                     ("c", "released")]
    for p in (a, x, c):
        p.join(WAIT)
        assert p.exitcode == 0


def test_exclusively_returns_to_the_shared_lock(tmp_path, ctx):
    lock = EngineLock(tmp_path)
    lock.shared()
    with lock.exclusively():
        assert lock.mode is not None
        log = ctx.Queue()
        b, b_started, b_release = _start(ctx, tmp_path, "shared", log, "b")
        assert not b_started.wait(NOT_YET), "a shared holder got in during exclusively()"
    assert b_started.wait(WAIT), "the shared holder did not get in after exclusively() ended"
    x, x_started, x_release = _start(ctx, tmp_path, "exclusive", log, "x")
    b_release.set()
    assert not x_started.wait(NOT_YET), "this process's shared lock was lost after exclusively()"
    lock.release()
    assert x_started.wait(WAIT)
    x_release.set()
    for p in (b, x):
        p.join(WAIT)
        assert p.exitcode == 0
