"""Sizes in a rendered compose file as the real consumer reads them: docker-compose 1.29.2 ``up --no-start``
(its ``config`` accepts strings its Docker SDK then cannot parse: a ``t`` suffix, or a byte count beyond
2**53 that its float conversion rounds past int64), and ``ddpctl validate`` agreeing."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from itest_helpers import ddpctl

pytestmark = [pytest.mark.docker]

SIZES = ["6m", "2t", 2**53 + 1, 2**63 - 1]


def test_every_size_ddpctl_accepts_is_created_by_docker_compose(engine, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    project = f"sz{uuid.uuid4().hex[:6]}"
    out = tmp_path / "compose.yaml"
    for size in SIZES:
        job = tmp_path / "job.yaml"
        job.write_text(f"shm_size: {size}\nmemory_per_node: {size}\n")
        r = ddpctl("render", "compose", "-f", str(job), "--name", project, "--image", "ddpctl/base:bookworm",
                   "--validate", "-o", str(out), "--", "python3", "-c", "1")
        assert r.returncode == 0, r.stderr
        try:
            up = subprocess.run([compose, "-p", project, "-f", str(out), "up", "--no-start"], capture_output=True,
                                text=True, timeout=120)
            assert up.returncode == 0, (size, out.read_text(), up.stderr[-600:])
        finally:
            subprocess.run([compose, "-p", project, "-f", str(out), "down", "-v"], capture_output=True, timeout=120)
