"""Preemption and elastic resume with real torchrun agents and gloo process groups on CPU.

SIGTERM to the agent (what Kubernetes eviction, `docker stop` and Slurm preemption send) and SIGTERM to one
worker only (one node of several) both end in one checkpoint at a step every rank agreed on and the retryable
exit code; the resumed run continues from that step. A run resumed on fewer processes re-deals the rest of
the epoch, so no sample is seen twice in it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ddp_helpers import TOY, _finish, env, ok, run, summary, torchrun
from ports import free_port
from procs import drain

pytestmark = pytest.mark.distributed

PREEMPTED = 143
ARGS = TOY + ["--deterministic", "--no-eval", "--sync-check", "off", "--log-interval", "1"]


def _events(out_dir, kind):
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in (json.loads(ln) for ln in f if ln.strip()) if r["event"] == kind]


def _wait_for_step(out_dir, step, procs, timeout=150):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["step"] >= step for r in _events(out_dir, "step")):
            return
        for p in procs:
            assert p.poll() is None, f"ended early: rc={p.returncode}\n{drain(p)[1][-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"step {step} not reached in {timeout}s")


def test_sigterm_to_the_agent_checkpoints_exits_retryable_and_resumes(tmp_path):
    out, full = tmp_path / "run", tmp_path / "full"
    args = ARGS + ["--output-dir", str(out)]
    cmd = [sys.executable, "-m", "ddp_train.launcher.run", "--standalone", "--nproc-per-node", "2", "-m", "ddp_train",
           *args, "--debug-step-sleep", "0.3"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    _wait_for_step(str(out), 3, [p])
    p.send_signal(signal.SIGTERM)  # to the agent, as a container engine stops PID 1
    res = _finish(p, cmd, 90)
    assert res.returncode == PREEMPTED, res.stderr[-3000:]
    [pre] = _events(str(out), "preempted")
    step = pre["step"]
    assert 3 < step < 16 and pre["signal"] == "SIGTERM"
    assert pre["checkpoint"].endswith(f"ckpt-{step:08d}.pt") and os.path.exists(pre["checkpoint"] + ".json")
    assert [c["reason"] for c in _events(str(out), "checkpoint")] == ["preempt"]
    assert f"rank-0 | ddp-train: stopped: SIGTERM at step {step}" in res.stderr
    assert "Traceback" not in res.stderr

    s = summary(ok(torchrun(2, args + ["--resume", "auto"])[0]))
    assert s["resumed_from"].endswith(f"ckpt-{step:08d}.pt") and s["steps"] == 16
    ok(torchrun(2, ARGS + ["--output-dir", str(full)])[0])  # the same run, never interrupted
    cmp = run(["compare", str(full / "ckpt-00000016.pt"), str(out / "ckpt-00000016.pt"), "--all"])
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr  # bit-identical: nothing lost, nothing repeated


def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    """One node preempted: its peers learn of it through the flag all-reduce and save with it."""
    out = tmp_path / "run"
    init = f"tcp://127.0.0.1:{free_port()}"
    procs = []
    for r in range(2):
        cmd = [sys.executable, "-m", "ddp_train", "--init-method", init, "--rank", str(r), "--world-size", "2",
               *ARGS, "--output-dir", str(out), "--debug-step-sleep", "0.3"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                                      start_new_session=True))
    _wait_for_step(str(out), 2, procs)
    procs[1].send_signal(signal.SIGUSR1)  # rank 1 only (Slurm's --signal, or a node's own eviction)
    r0, r1 = (_finish(p, p.args, 90) for p in procs)
    assert (r0.returncode, r1.returncode) == (PREEMPTED, PREEMPTED), (r0.stderr[-2000:], r1.stderr[-2000:])
    [pre] = _events(str(out), "preempted")
    assert pre["signal"] == "SIGUSR1"
    line = f"SIGUSR1 at step {pre['step']} "
    assert line in r0.stderr and line in r1.stderr  # the same step on both ranks
    s = summary(ok(run(ARGS + ["--output-dir", str(out), "--resume", "auto", "--strategy", "single"])))
    assert s["resumed_from"].endswith(f"ckpt-{pre['step']:08d}.pt")


def _samples(log_dir):
    """{epoch: [sample indices of every step of every rank]} from --debug-sample-log."""
    seen = {}
    for name in sorted(os.listdir(log_dir)):
        with open(os.path.join(log_dir, name)) as f:
            for ln in f:
                epoch, _step, _world, idx = ln.split()
                seen.setdefault(int(epoch), []).extend(int(i) for i in idx.split(","))
    return seen


def test_resume_on_fewer_processes_sees_no_sample_twice(tmp_path):
    out, log1, log2 = tmp_path / "run", tmp_path / "log1", tmp_path / "log2"
    # 3 ranks x 32: 5 steps per epoch (480 of 512 samples); stop after 3 steps = 288 samples of epoch 1
    args = ARGS + ["--output-dir", str(out), "--scale-lr"]
    s1 = summary(ok(torchrun(3, args + ["--max-steps", "3", "--debug-sample-log", str(log1)])[0]))
    assert s1["steps"] == 3 and s1["global_batch"] == 96
    # resumed on 2 ranks: the other 224 samples of epoch 1 make 3 whole global batches of 64 (32 left out)
    p = ok(torchrun(2, args + ["--resume", "auto", "--debug-sample-log", str(log2)])[0])
    s2 = summary(p)
    assert s2["resumed_from"].endswith("ckpt-00000003.pt") and s2["global_batch"] == 64
    assert s2["steps"] == 3 + 3 + 8  # epoch 2 is an ordinary 2-rank epoch of 8 steps
    assert "elastic resume: 3 x 32 -> 2 x 32" in p.stdout
    assert "--scale-lr sets the base LR to 0.0125" in p.stderr  # 0.05 x 64 / 256: the linear scaling rule
    before, after = _samples(str(log1)), _samples(str(log2))
    epoch1 = before[0] + after[0]
    assert len(before[0]) == 288 and len(after[0]) == 192
    assert len(set(epoch1)) == len(epoch1) == 480  # no sample twice in the epoch
    assert len(set(after[1])) == len(after[1]) == 512  # the next epoch: every sample once
