"""benchmarks/benchlib.py, the benchmark tools' shared helper: the deadline guard, the GPU-run environment and
running a program with a log and a hard limit (real subprocesses)."""

from __future__ import annotations

import sys
import time

from benchmarks import benchlib


def test_deadline_allows_and_caps(capsys):
    dl = benchlib.Deadline(10)
    assert dl.allows(5, "a stage") and 9 < dl.left() <= 10
    assert not dl.allows(60, "the long run")
    assert "skipped (time guard: 10 s left, needs 60 s): the long run" in capsys.readouterr().out
    assert dl.cap(300) <= 10 and dl.cap(3) == 3 and dl.cap(300, reserve=20) == 1.0


def test_gpu_env_puts_src_first_and_multicast_off(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    env = benchlib.gpu_env({"X": "1"})
    assert env["PYTHONPATH"].split(":")[:2] == [str(benchlib.SRC), "/elsewhere"]
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["X"] == "1" and "TORCH_NCCL_BLOCKING_WAIT" not in env


def test_run_logs_output_and_ends_a_hung_program(tmp_path):
    log = tmp_path / "a.log"
    assert benchlib.run([sys.executable, "-c", "print('hello')"], log=log, timeout=30) == 0
    assert "hello" in log.read_text()
    t0 = time.monotonic()
    assert benchlib.run([sys.executable, "-c", "import time; time.sleep(60)"], log=log, timeout=1) == 124
    assert time.monotonic() - t0 < 20 and "timed out after 1 s" in log.read_text()
    assert benchlib.run(["/no/such/program"], log=log, timeout=5) == 127
