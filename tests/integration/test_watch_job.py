"""Watching a real job (Docker Engine, CPU image, gloo): a 2-node ``ddpctl up --max-restarts 1`` on a pty shows
its live progress line, ``status --json`` shows the step rising and the ETA falling, a killed node shows as a
restart after which progress resumes from the checkpoint step, and after ``down`` ``logs`` gives the same lines
and ``status`` the final result (the output kept under XDG_STATE_HOME, tests/conftest.py)."""

from __future__ import annotations

import json
import time

from attached import OnPty
from itest_helpers import ddpctl

TRAIN = ["ddp-train", "--workload", "toy", "--train-size", "2048", "--test-size", "256", "--batch-size", "32",
         "--epochs", "1", "--no-eval", "--log-interval", "1", "--checkpoint-every", "4", "--output-dir",
         "/checkpoints", "--debug-step-sleep", "0.5"]


def _status(job: str, check: bool = True) -> dict:
    p = ddpctl("status", job, "--json", check=check, timeout=60)
    return json.loads(p.stdout) if p.returncode == 0 else {"progress": None}  # not started yet


def _until(test, what: str, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_watch_two_node_up_job_status_restart_and_kept_output(engine, cpu_image, job_name):
    run = OnPty("--name", job_name, "-n", "2", "--image", cpu_image, "--max-restarts", "1", "--", *TRAIN)
    try:
        first = _until(lambda: (s := _status(job_name, check=False))["progress"] and s["progress"]["step"] >= 3 and s,
                       "the first progress records")
        assert first["state"] == "running" and first["records_seen"] and len(first["ranks"]) == 2
        assert first["progress"]["total"] == 32 and first["progress"]["eta_s"] > 0
        # the ETA follows the recent step rate, so one read may tick up under load; it must come down as steps go on
        _until(lambda: (s := _status(job_name))["progress"]["step"] >= first["progress"]["step"] + 3
                        and s["progress"]["eta_s"] < first["progress"]["eta_s"] and s,
                        f"three more steps and an ETA below {first['progress']['eta_s']} s")
        # a node dies (as a lost machine): the job restarts and goes on from its last checkpoint
        engine.containers.get(f"{job_name}-node-1").kill()
        after = _until(lambda: (s := _status(job_name))["restarts"] == 1 and s["ranks"]
                       and all(r["restart"] == 1 for r in s["ranks"]) and s, "progress after the restart", 300)
        ckpt = after["progress"]["checkpoint"]["step"]
        assert ckpt >= 4 and ckpt % 4 == 0
        resumed = [json.loads(x) for x in ddpctl("logs", job_name, "--records").stdout.splitlines()
                   if '"event":"progress"' in x and x.startswith("node-0 rank-0 | ")
                   for x in [x.split(" | ", 1)[1]]]
        assert resumed[0]["restart"] == 1 and resumed[0]["step"] == ckpt + 1, resumed[:2]
        assert resumed[0]["checkpoint"]["step"] == ckpt
        assert run.proc.wait(timeout=300) == 0, run.text[-3000:]
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    out = run.text
    assert "progress: step " in out and "samples/s, ETA" in out and '"event":"progress"' not in out
    assert f"job {job_name}: output kept in " in out
    final = _status(job_name)
    assert final["result"] == "succeeded" and final["summary"]["steps"] == 32 and final["progress"]["step"] == 32
    before = ddpctl("logs", job_name, check=True)
    assert '"event":"progress"' not in before.stdout and "sync check PASS" in before.stdout
    assert "removed 2 container(s)" in ddpctl("down", job_name, check=True).stderr
    after_down = ddpctl("logs", job_name, check=True)
    assert after_down.stdout == before.stdout and "its output as kept in" in after_down.stderr
    gone = _status(job_name)
    assert gone["source"] == "kept" and gone["result"] == "succeeded" and gone["restarts"] == 1
    assert gone["summary"]["exit_code"] == 0 and gone["progress"]["step"] == 32
    listed = ddpctl("ps", "--all", job_name, check=True).stdout
    assert job_name in listed and "succeeded" in listed
