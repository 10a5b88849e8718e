"""``ddpctl status --slurm JOBID`` on a real Slurm cluster (tests/support/cluster.py): the rendered script's ranks
write progress records into the job's output file in the submit directory; status reads them with scontrol's
state: the step rises and the ETA falls, a requeue shows as a restart that resumes from the checkpoint step, and
the finished job reads as succeeded with its summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sbatch_real import _job_fields, _job_id, _render, _sbatch

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
TRAIN = ["--", "ddp-train", "--workload", "toy", "--train-size", "512", "--test-size", "64", "--batch-size", "32",
         "--epochs", "2", "--no-eval", "--sync-check", "off", "--log-interval", "1", "--checkpoint-interval", "3",
         "--debug-step-sleep", "0.5"]  # 2 ranks: 16 steps, a checkpoint every 3


def _status(cluster, job: str, where: Path) -> dict:
    p = subprocess.run([DDPCTL, "status", "--slurm", job, "--dir", str(where), "--json"], capture_output=True,
                       text=True, env=cluster.env(), timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _until(test, what, cluster, job, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout}s: {_job_fields(cluster, job)}\n{cluster.logs()}")


def test_status_slurm_step_eta_requeue_and_final_result(slurm_cluster, tmp_path):
    script = _render(tmp_path, "stat", "--requeue", *TRAIN)
    job = _job_id(_sbatch(slurm_cluster, script, wait=False, timeout=60))
    first = _until(lambda: (s := _status(slurm_cluster, job, tmp_path))["progress"] and s["progress"]["step"] >= 4
                   and s, "progress records", slurm_cluster, job)
    assert first["state"] == "running" and len(first["ranks"]) == 2 and first["progress"]["total"] == 16
    # the ETA follows the recent step rate, so one read may tick up under load; it must come down as steps go on
    _until(lambda: (s := _status(slurm_cluster, job, tmp_path))["progress"]["step"]
                    >= first["progress"]["step"] + 2 and s["progress"]["eta_s"] < first["progress"]["eta_s"] and s,
                    f"two more steps and an ETA below {first['progress']['eta_s']} s", slurm_cluster, job)
    subprocess.run(["scontrol", "requeue", job], check=True, env=slurm_cluster.env(), timeout=30)
    _until(lambda: _job_fields(slurm_cluster, job)["JobState"] == "COMPLETED", "completed", slurm_cluster, job, 400)
    final = _status(slurm_cluster, job, tmp_path)
    assert final["result"] == "succeeded" and final["restarts"] == 1, final
    assert final["summary"]["steps"] == 16 and final["progress"]["step"] == 16
    lines = [x.split(" | ", 1)[-1] for x in (tmp_path / f"stat-{job}.out").read_text().splitlines()]
    recs = [json.loads(x) for x in lines if x.startswith('{"event":"progress"') and '"rank":0,' in x]
    again = [r for r in recs if r["restart"] == 1]
    assert again and again[0]["checkpoint"] and again[0]["step"] == again[0]["checkpoint"]["step"] + 1, again[:2]
    assert all(r["rank"] in (0, 1) for r in final["ranks"]) and all(r["restart"] == 1 for r in final["ranks"])
