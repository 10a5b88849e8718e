"""Preemption and requeue on a real Slurm cluster (tests/support/cluster.py: munged, slurmctld, two slurmd).

The rendered script with ``--requeue`` (and ``--signal-seconds``) keeps ddp-train's checkpoints in
``$DDPCTL_CHECKPOINTS`` (default ``$SLURM_SUBMIT_DIR/<job>-ckpt``) and resumes from them on every run. Real:
Slurm's requeue (``scontrol requeue``) and signal delivery (``scancel --signal=USR1 --batch``, what
``--signal=B:USR1@T`` sends T seconds before the time limit), srun, torchrun (through ddp-train-launch) and
ddp-train on gloo."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from test_sbatch_real import _job_fields, _job_id, _render, _sbatch

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAIN = ["--", "ddp-train", "--workload", "toy", "--train-size", "512", "--test-size", "64", "--batch-size", "32",
         "--epochs", "2", "--no-eval", "--sync-check", "off", "--log-interval", "1", "--checkpoint-interval", "3",
         "--debug-step-sleep", "0.4"]  # 2 ranks: 8 steps per epoch, 16 in all; a checkpoint every 3 steps


def _wait(cond, timeout, what, cluster, job):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout}s: {_job_fields(cluster, job)}\n{cluster.logs()}")


def _checkpoints(d: Path):
    return sorted(p.name for p in d.glob("ckpt-*.pt.json")) if d.is_dir() else []


def _summaries(log: str):
    lines = [ln.split(" | ", 1)[-1] for ln in log.splitlines()]
    return [json.loads(ln) for ln in lines if ln.startswith('{"event": "summary"')]


def _run_until_requeued_and_done(cluster, tmp_path, name, interrupt, *extra):
    script = _render(tmp_path, name, "--requeue", *extra, *TRAIN)
    job = _job_id(_sbatch(cluster, script, wait=False, timeout=60))
    ckpt = tmp_path / f"{name}-ckpt"
    _wait(lambda: len(_checkpoints(ckpt)) >= 1, 240, "no checkpoint", cluster, job)
    t0 = time.monotonic()
    interrupt(job)
    _wait(lambda: _job_fields(cluster, job).get("Restarts", "0") != "0", 120, "not requeued", cluster, job)
    pending = {"seconds": 0.0, "reason": None}

    def done():
        fields = _job_fields(cluster, job)
        if fields["JobState"] == "PENDING":
            pending["seconds"] = time.monotonic() - t0
            pending["reason"] = fields.get("Reason")
        return fields["JobState"] == "COMPLETED"

    _wait(done, 400, "not completed", cluster, job)
    wall = time.monotonic() - t0
    print(f"{name}: pending again until {pending['seconds']:.0f} s after the interrupt (Reason={pending['reason']})")
    log = (tmp_path / f"{name}-{job}.out").read_text()  # --open-mode=append: both runs
    return job, log, ckpt, wall


def test_scontrol_requeue_resumes_from_the_checkpoint(slurm_cluster, tmp_path):
    env = slurm_cluster.env()
    job, log, ckpt, wall = _run_until_requeued_and_done(
        slurm_cluster, tmp_path, "rq",
        lambda j: subprocess.run(["scontrol", "requeue", j], check=True, env=env, timeout=30))
    fields = _job_fields(slurm_cluster, job)
    assert fields["Restarts"] == "1" and fields["ExitCode"] == "0:0", fields
    [summary] = _summaries(log)  # the first run was stopped; the second one finished
    assert summary["resumed_from"] and summary["resumed_from"].startswith(str(ckpt)), log[-3000:]
    assert summary["steps"] == 16 and summary["world_size"] == 2
    resumed_at = int(Path(summary["resumed_from"]).name[5:13])
    assert resumed_at >= 3, log[-3000:]
    print(f"scontrol requeue -> completed: {wall:.1f} s (resumed at step {resumed_at})")


def test_usr1_before_the_time_limit_checkpoints_stops_and_requeues_itself(slurm_cluster, tmp_path):
    env = slurm_cluster.env()
    job, log, ckpt, wall = _run_until_requeued_and_done(
        slurm_cluster, tmp_path, "sig",
        # what --signal=B:USR1@600 does 600 s before the time limit, now
        lambda j: subprocess.run(["scancel", "--signal=USR1", "--batch", j], check=True, env=env, timeout=30),
        "--time", "01:00:00", "--signal-seconds", "600")
    assert "ddpctl: USR1 (600 s before the time limit): checkpoint and stop" in log, log[-3000:]
    assert "ddpctl: requeueing job" in log
    stopped = [ln for ln in log.splitlines() if "ddp-train: stopped: SIGTERM at step" in ln]
    assert stopped, log[-4000:]  # every rank agreed on one step and saved there
    step = int(stopped[0].split("at step ")[1].split()[0])
    [summary] = _summaries(log)
    assert summary["resumed_from"].endswith(f"ckpt-{step:08d}.pt") and summary["steps"] == 16, log[-3000:]
    print(f"USR1 -> checkpoint at step {step} -> requeued -> completed: {wall:.1f} s")
