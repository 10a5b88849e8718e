"""ddp-train-launch's worker path (ddp_train.launcher.exits, .worker): which commands run through the worker
runner, the exit codes it keeps, and the exit watch on real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ddp_train.errors import EXIT_HUNG
from ddp_train.launcher import exits
from ddp_train.launcher.worker import exit_code_of

W = ["-m", exits.WORKER_MODULE]
TR = ["--nnodes", "2", "--node-rank", "0", "--tee", "3", "--no-python"]


@pytest.mark.parametrize("cmd, wrapped", [
    (["python", "train.py", "--lr", "1"], ["python", *W, "train.py", "--lr", "1"]),
    (["python3", "-u", "train.py"], ["python3", "-u", *W, "train.py"]),
    (["/opt/ddpctl/bin/python3.11", "-X", "dev", "-W", "ignore", "t.py"],
     ["/opt/ddpctl/bin/python3.11", "-X", "dev", "-W", "ignore", *W, "t.py"]),
    (["python", "-m", "pkg.train", "x"], ["python", *W, "-m", "pkg.train", "x"]),
    (["python", "-c", "print(1)"], None),
    (["python", "-i", "t.py"], None),
    (["python", "-"], None),
    (["python"], None),
    (["ddp-train", "--epochs", "1"], None),
    (["sh", "-c", "python train.py"], None),
    (["pythonista", "train.py"], None),
])
def test_which_commands_run_through_the_worker(cmd, wrapped, monkeypatch):
    monkeypatch.delenv(exits.WORKER_SWITCH_ENV, raising=False)
    assert exits.wrap_command([*TR, *cmd]) == [*TR, *(wrapped or cmd)]


def test_without_no_python_or_switched_off_nothing_changes(monkeypatch):
    argv = ["--nnodes", "1", "train.py"]  # torchrun builds the python command itself
    assert exits.wrap_command(argv) == argv
    monkeypatch.setenv(exits.WORKER_SWITCH_ENV, "off")
    assert exits.wrap_command([*TR, "python", "t.py"]) == [*TR, "python", "t.py"]


def test_exit_codes_as_python_gives_them(capsys):
    assert exit_code_of(SystemExit()) == 0 and exit_code_of(SystemExit(3)) == 3
    assert exit_code_of(SystemExit(256 + 7)) == 7 and exit_code_of(SystemExit(-1)) == 255
    assert exit_code_of(SystemExit("bad input")) == 1 and capsys.readouterr().err == "bad input\n"


def test_exit_timeout_env(monkeypatch):
    monkeypatch.setenv(exits.EXIT_TIMEOUT_ENV, "7.5")
    assert exits.exit_timeout() == 7.5
    monkeypatch.setenv(exits.EXIT_TIMEOUT_ENV, "")
    assert exits.exit_timeout() == exits.DEFAULT_EXIT_TIMEOUT
    monkeypatch.delenv(exits.EXIT_TIMEOUT_ENV)
    assert exits.exit_timeout() == exits.DEFAULT_EXIT_TIMEOUT


@pytest.mark.parametrize("bad", ["abc", "-5", "0", "nan", "inf", "1e400", "604801", "\x1b[2J"])
def test_a_bad_exit_timeout_is_one_usage_line_not_the_default(monkeypatch, capsys, bad):
    """It fell back to 300 s in silence; now, as DDP_TRAIN_LINK_GBPS (the same helper, errors.env_number), the
    launcher stops at once with one line and the usage code, before it sets anything up."""
    from ddp_train.errors import EXIT_USAGE, TrainError
    from ddp_train.launcher import run

    monkeypatch.setenv(exits.EXIT_TIMEOUT_ENV, bad)
    with pytest.raises(TrainError) as e:
        exits.exit_timeout()
    assert e.value.code == EXIT_USAGE and f"{exits.EXIT_TIMEOUT_ENV}={bad!r} is not a positive number" in str(e.value)

    def nothing_set_up(*_a, **_k):
        raise AssertionError("the launcher set something up before it checked its environment")

    monkeypatch.setattr(exits.tempfile, "mkdtemp", nothing_set_up)
    monkeypatch.setattr(run.os, "dup", nothing_set_up)
    assert run.main(["--standalone", "--nproc-per-node", "1", "--no-python", "true"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "\x1b" not in captured.err
    assert captured.err.startswith(f"ddp-train-launch: error: {exits.EXIT_TIMEOUT_ENV}=")


def _note(watch: exits.ExitWatch, proc: subprocess.Popen, rank: int, ended: float, threads=(), code=0) -> None:
    with open(f"/proc/{proc.pid}/stat") as fh:
        start = fh.read().rsplit(")", 1)[1].split()[19]
    note = {"rank": str(rank), "pid": proc.pid, "start": start, "ended": ended, "code": code, "threads": list(threads)}
    with open(os.path.join(watch.directory, str(proc.pid)), "w") as fh:
        json.dump(note, fh)


def test_exit_watch_kills_only_what_outlived_its_bound():
    watch = exits.ExitWatch(timeout=30)
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    fresh = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _note(watch, late, 1, time.time() - 31, ["Thread-1 (serve)"])
        _note(watch, fresh, 0, time.time())
        watch.check()
        assert late.wait(timeout=10) == -9
        assert fresh.poll() is None and watch.hung == {1: (30, ["Thread-1 (serve)"])}
        line = watch.line(1, EXIT_HUNG)
        assert line.startswith("ddp-train-launch: rank 1 failed (exit code 124, did not exit): ") and "\n" not in line
        assert "Thread-1 (serve)" in line and exits.EXIT_TIMEOUT_ENV in line
    finally:
        fresh.kill()
        fresh.wait()
        watch.close()
    assert not os.path.exists(watch.directory)


def test_exit_watch_forgets_a_process_that_exited_and_keeps_its_program_code():
    watch = exits.ExitWatch(timeout=1)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        _note(watch, proc, 0, time.time() - 5, code=3)
        proc.wait()
        watch.check()
        assert watch.hung == {} and os.listdir(watch.directory) == []
        assert list(watch.programs_ended) == [proc.pid] and watch.programs_ended[proc.pid][0] == 3
    finally:
        watch.close()


def test_the_exit_watch_kills_rank_0_past_its_bound_and_names_it():
    import json
    import subprocess
    import sys

    from ddp_train.launcher import exits

    watch = exits.ExitWatch(timeout=1.0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        note = {"pid": child.pid, "rank": 0, "ended": 0.0, "start": exits._start_time(child.pid),
                "threads": ["worker"]}
        (exits.Path(watch.directory) / "0").write_text(json.dumps(note))
        watch.check(now=10.0)
        assert child.wait(timeout=10) == -9 and watch.hung == {0: (1.0, ["worker"])}
        assert watch.line(0, 124).startswith("ddp-train-launch: rank 0 failed (exit code 124, did not exit)")
    finally:
        child.kill()
        watch.close()
