"""``--tensorboard`` through the real console script: every render command and ``up`` offer it, a target that has
no volume for the event files refuses in one line (exit 2, nothing written), and the job file's
``tensorboard: true`` is the same as the flag."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DDPCTL = str(Path(sys.executable).parent / "ddpctl")


def ddpctl(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


@pytest.mark.parametrize("cmd", [["up"], ["render", "compose"], ["render", "pytorchjob"], ["render", "trainjob"],
                                 ["render", "slurm"]])
def test_every_command_offers_the_flag(cmd):
    proc = ddpctl(*cmd, "--help")
    assert proc.returncode == 0 and "--tensorboard" in proc.stdout and "DDPCTL_TENSORBOARD" in proc.stdout


@pytest.mark.parametrize("args, fix", [
    (["pytorchjob"], "mount storage every pod sees there: -v /mnt/shared/ckpt:/checkpoints"),
    (["trainjob"], "mount storage every pod sees there: -v /mnt/shared/ckpt:/checkpoints"),
    (["slurm", "--container", "apptainer"], "mount a shared directory there: -v /shared/ckpt:/checkpoints"),
    (["compose", "--network", "host", "--hosts", "10.0.0.1,10.0.0.2"], "-v /shared/ckpt:/checkpoints"),
    (["compose", "--user", "1000:1000"], "mount a directory the user owns there: -v ./runs:/checkpoints"),
])
def test_no_volume_for_the_event_files_is_one_line_and_nothing_written(tmp_path, args, fix):
    out = tmp_path / "out.yaml"
    proc = ddpctl("render", *args, "-n", "2", "--tensorboard", "-o", str(out))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {args[0]} does not support tensorboard") and fix in proc.stderr
    assert not out.exists()


def test_rendered_files_validate_and_a_job_file_says_the_same(tmp_path):
    flag = ddpctl("render", "compose", "-n", "2", "--name", "tb", "--tensorboard", "--validate")
    assert flag.returncode == 0, flag.stderr
    job = tmp_path / "job.yaml"
    job.write_text("name: tb\nnodes: 2\ntensorboard: true\n")
    assert ddpctl("render", "compose", "-f", str(job)).stdout == flag.stdout
    doc = yaml.safe_load(flag.stdout)
    assert doc["volumes"]["tb-ckpt"]["name"] == "tb-ckpt"
    for target in ("pytorchjob", "trainjob"):
        proc = ddpctl("render", target, "-f", str(job), "-v", "/mnt/shared/ckpt:/checkpoints", "--validate")
        assert proc.returncode == 0 and "/checkpoints/tensorboard" in proc.stdout, proc.stderr
    proc = ddpctl("render", "slurm", "-f", str(job))
    assert proc.returncode == 0 and '--tensorboard "$DDPCTL_TENSORBOARD"' in proc.stdout


def test_up_dry_run_shows_the_volume_and_the_flag(tmp_path):
    proc = ddpctl("up", "--dry-run", "--name", "tb", "-n", "2", "--tensorboard", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = yaml.safe_load(proc.stdout)
    for c in plan["containers"]:
        assert c["command"][-2:] == ["--tensorboard", "/checkpoints/tensorboard"]
        assert {"type": "volume", "source": "tb-ckpt", "target": "/checkpoints", "read_only": False} in c["mounts"]
        assert c["environment"]["DDPCTL_TENSORBOARD"] == "/checkpoints/tensorboard"
