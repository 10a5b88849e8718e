"""This host's build lock (ddpctl.images.build_lock), with real processes and a real flock: a second holder waits
and says so, gets the lock when the first ends (also when the first is killed), gives up after its bound with one
line naming the fix, and never follows a link planted where the lock file goes (it builds without the lock
then, saying so)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import pytest

from ddpctl.errors import EngineError
from ddpctl.images import build_lock

WAIT = 20  # seconds: the deadline of every wait below


def _hold(cache, started, release):
    os.environ["XDG_CACHE_HOME"] = cache
    with build_lock.held("layer-a", what="requirements layer x", say=lambda _line: None):
        started.set()
        release.wait(WAIT)


@pytest.fixture
def holder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ctx = mp.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), started, release))
    proc.start()
    assert started.wait(WAIT), "the first holder never got the lock"
    yield proc, release
    if proc.is_alive():  # (setting an Event a killed process waited on would wait for that process forever)
        release.set()
        proc.join(WAIT)
    if proc.is_alive():
        proc.kill()


def test_a_second_holder_waits_says_so_and_gets_the_lock_when_the_first_ends(holder):
    proc, release = holder
    said: list[str] = []
    t0 = time.monotonic()
    release_at = t0 + 0.6

    def say(line):
        said.append(line)

    import threading

    threading.Timer(release_at - time.monotonic(), release.set).start()
    with build_lock.held("layer-a", what="requirements layer x", say=say):
        got = time.monotonic()
    assert got >= release_at - 0.05  # not before the first let go
    assert said == ["another ddpctl on this host is building requirements layer x: waiting for it (up to 3600 s)"]


def test_a_killed_holder_releases_the_lock(holder):
    proc, _ = holder
    proc.kill()
    proc.join(WAIT)
    with build_lock.held("layer-a", what="x", say=pytest.fail, wait_s=WAIT):
        pass


def test_the_wait_is_bounded_with_one_line_naming_the_fix(holder):
    said: list[str] = []
    with pytest.raises(EngineError) as err:
        with build_lock.held("layer-a", what="requirements layer x", say=said.append, wait_s=1.0):
            pytest.fail("the lock was given while another process held it")
    assert err.value.problem == "another ddpctl on this host has been building requirements layer x for over 1 s"
    assert "run this command again" in err.value.fix
    assert len(said) == 1


def test_other_keys_do_not_wait(holder):
    with build_lock.held("layer-b", what="x", say=pytest.fail, wait_s=0.1):
        pass


def test_a_link_where_the_lock_file_goes_is_not_followed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "ddpctl" / "locks"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (folder / "layer-a.lock").symlink_to(victim)
    said: list[str] = []
    ran = False
    with build_lock.held("layer-a", what="requirements layer x", say=said.append):
        ran = True
    assert ran and victim.read_text() == "keep"
    assert len(said) == 1 and said[0].startswith(f"note: cannot open the build lock in {folder} (")
    assert "building requirements layer x without it" in said[0]


def test_a_cache_folder_that_cannot_be_made_builds_without_the_lock(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    said: list[str] = []
    with build_lock.held("layer-a", what="x", say=said.append):
        pass
    assert len(said) == 1 and "set XDG_CACHE_HOME to a writable folder" in said[0]


def test_a_key_that_is_not_a_file_name_is_refused():
    with pytest.raises(ValueError):
        with build_lock.held("../x", what="x", say=print):
            pass
