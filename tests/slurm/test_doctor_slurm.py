"""``ddpctl doctor --target slurm`` against the real Slurm cluster of this session (conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))


def doctor(cluster, *args):
    return subprocess.run([DDPCTL, "doctor", "--target", "slurm", *args], capture_output=True, text=True,
                          env=cluster.env(), timeout=120)


def status(proc, name):
    for line in proc.stdout.splitlines():
        if line[6:].startswith(name + ":"):
            return line[:4].strip()
    raise AssertionError(f"no {name} line in:\n{proc.stdout}")


def test_doctor_sees_the_cluster_and_its_partition(slurm_cluster):
    proc = doctor(slurm_cluster, "--partition", "debug")
    assert status(proc, "slurm commands") == "ok"
    assert status(proc, "partitions") == "ok" and "debug (UP)" in proc.stdout
    assert proc.returncode == 0, proc.stdout


def test_doctor_unknown_partition_and_missing_container_runtimes(slurm_cluster):
    proc = doctor(slurm_cluster, "--partition", "a100")
    assert proc.returncode == 1 and status(proc, "partitions") == "fail"
    assert "visible: debug (UP)" in proc.stdout
    pyxis = doctor(slurm_cluster, "--container", "pyxis")  # Debian's Slurm has no pyxis plugin
    assert pyxis.returncode == 1 and status(pyxis, "pyxis") == "fail"


def test_doctor_with_slurmctld_unreachable(slurm_cluster, tmp_path):
    conf = tmp_path / "slurm.conf"  # the cluster's config with the controller on a port nobody listens on
    text = slurm_cluster.conf.read_text().replace(f"SlurmctldPort={slurm_cluster.ports['slurmctld']}",
                                                  "SlurmctldPort=1")
    conf.write_text(text)
    proc = subprocess.run([DDPCTL, "doctor", "--target", "slurm"], capture_output=True, text=True, timeout=180,
                          env=slurm_cluster.env(SLURM_CONF=str(conf)))
    assert proc.returncode == 1 and status(proc, "partitions") == "fail"
    assert "scontrol ping" in proc.stdout
