"""``ddpctl render slurm --tensorboard`` on a real Slurm cluster (tests/support/cluster.py): ddp-train on 2 nodes
writes its TensorBoard event files to ``$DDPCTL_CHECKPOINTS/tensorboard`` (the script's default,
``<submit dir>/<job>-ckpt``), tensorboard's own reader reads them back with the loss values of rank 0's progress
records, and ``status --slurm`` names the directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_sbatch_real import _job_id, _render, _sbatch

pytestmark = [pytest.mark.slurm]
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
TRAIN = ["--", "ddp-train", "--workload", "toy", "--train-size", "256", "--test-size", "64", "--batch-size", "32",
         "--epochs", "1", "--sync-check", "off", "--log-interval", "1"]  # 2 ranks: 4 steps


def test_slurm_tensorboard_event_files_in_the_checkpoint_directory(slurm_cluster, tmp_path):
    pytest.importorskip("tensorboard")  # the ranks run from this venv (its dev extra has it)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    script = _render(tmp_path, "tbs", "--tensorboard", *TRAIN)
    proc = _sbatch(slurm_cluster, script, timeout=300)
    assert proc.returncode == 0, proc.stderr + slurm_cluster.logs()
    job = _job_id(proc)
    logdir = tmp_path / "tbs-ckpt" / "tensorboard"
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    lines = [x.split(" | ", 1)[-1] for x in (tmp_path / f"tbs-{job}.out").read_text().splitlines()]
    rank0 = [json.loads(x) for x in lines if x.startswith('{"event":"progress"') and '"rank":0,' in x]
    assert [(e.step, round(e.value, 4)) for e in acc.Scalars("train/loss")] == [(r["step"], r["loss"]) for r in rank0]
    assert [r["step"] for r in rank0] == [1, 2, 3, 4] and [e.step for e in acc.Scalars("eval/test_acc")] == [4]
    st = subprocess.run([DDPCTL, "status", "--slurm", job, "--dir", str(tmp_path), "--json"], capture_output=True,
                        text=True, env=slurm_cluster.env(), timeout=60)
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["tensorboard"]["host_path"] == str(logdir)
