"""The compose path: a file from `ddpctl render compose` runs the same job with docker-compose 1.29.2
(Debian's client) on the same image as `ddpctl up`, and finishes with a passing sync check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from itest_helpers import CPU_IMAGE, ddpctl, labelled


def test_rendered_compose_runs_to_completion(engine, cpu_image, job_name, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    out = tmp_path / "compose.yaml"
    ddpctl("render", "compose", "--name", job_name, "--nodes", "2", "--nproc-per-node", "2",
           "--image", CPU_IMAGE, "-o", str(out), check=True)
    services = yaml.safe_load(out.read_text())["services"]
    assert len(services) == 2
    base = [compose, "-f", str(out), "-p", job_name, "--no-ansi"]
    try:
        proc = subprocess.run([*base, "up", "--abort-on-container-exit", "--no-color"], capture_output=True,
                              text=True, timeout=400)
        assert proc.returncode == 0, proc.stderr[-2000:]
        codes = subprocess.run([*base, "ps", "-q"], capture_output=True, text=True, check=True).stdout.split()
        exits = [engine.containers.get(c).attrs["State"]["ExitCode"] for c in codes]
        assert exits == [0, 0]
        master = engine.containers.get(f"{job_name}-node-0") if f"{job_name}-node-0" in services else None
        logs = (master.logs().decode() if master else proc.stdout)
        summaries = [json.loads(x[x.index("{"):]) for x in logs.splitlines()
                     if '"event": "summary"' in x and "{" in x]
        assert summaries and summaries[-1]["sync_check"] == "pass" and summaries[-1]["world_size"] == 4
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], capture_output=True, timeout=120)
    assert labelled(engine, job_name) == ([], [])


def test_rendered_compose_honours_user_and_prefixes_rank_lines(engine, cpu_image, job_name, tmp_path):
    """`user` reaches compose (files written through the workdir belong to it, HOME is writable) and the
    nodes start through ddp-train-launch (each worker line carries its global rank)."""
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    work = tmp_path / "work"
    work.mkdir()
    if os.geteuid() == 0:
        os.chown(work, 4321, 4321)
    else:
        work.chmod(0o777)
    out = tmp_path / "compose.yaml"
    script = ("import os; r = os.environ['RANK']; open(f'out-{r}', 'w').write(os.environ['HOME']); "
              "os.makedirs(os.path.expanduser('~/.cache/x'), exist_ok=True); print('wrote', r)")
    ddpctl("render", "compose", "--name", job_name, "--nproc-per-node", "2", "--image", CPU_IMAGE, "--user", "4321:4321",
           "--workdir", str(work), "-o", str(out), "--", "python", "-c", script, check=True)
    assert yaml.safe_load(out.read_text())["services"][f"{job_name}-node-0"]["user"] == "4321:4321"
    base = [compose, "-f", str(out), "-p", job_name, "--no-ansi"]
    try:
        proc = subprocess.run([*base, "up", "--abort-on-container-exit", "--no-color"], capture_output=True,
                              text=True, timeout=400)
        assert proc.returncode == 0, proc.stderr[-2000:]
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], capture_output=True, timeout=120)
    for r in ("0", "1"):
        f = work / f"out-{r}"
        assert (f.stat().st_uid, f.stat().st_gid) == (4321, 4321) and f.read_text() == "/tmp"
        assert f"| rank-{r} | wrote {r}" in proc.stdout, proc.stdout[-2000:]
    assert labelled(engine, job_name) == ([], [])
