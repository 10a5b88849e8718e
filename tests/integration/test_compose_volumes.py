"""Short-syntax compose volumes: ``ddpctl validate`` agrees with the real consumer, docker-compose 1.29.2's
``up --no-start`` on the real Docker Engine (its ``config`` passes several strings that ``up`` refuses)."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from itest_helpers import ddpctl

pytestmark = [pytest.mark.docker]

VOLUMES = ["/a:/b:rw,z", "/a:/b:", "/a:/b:ro:z", "/a:/b:xx", "/a:/b:ro,rw", "/a:/b:nocopy", ":/b", "/a:/",
           "/a:/b:z,Z", "/a:b"]


def test_validate_and_docker_compose_up_agree_on_short_volumes(engine, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    project = f"vol{uuid.uuid4().hex[:6]}"
    f = tmp_path / "docker-compose.yml"
    disagree = []
    for vol in VOLUMES:
        f.write_text(f'version: "3.8"\nservices:\n  s:\n    image: ddpctl/base:bookworm\n    volumes: ["{vol}"]\n')
        try:
            up = subprocess.run([compose, "-p", project, "-f", str(f), "up", "--no-start"], capture_output=True,
                                text=True, timeout=120)
        finally:
            subprocess.run([compose, "-p", project, "-f", str(f), "down"], capture_output=True, timeout=120)
        ours = ddpctl("validate", str(f))
        if (up.returncode == 0) != (ours.returncode == 0):
            disagree.append((vol, up.returncode, ours.stdout + ours.stderr))
    assert not disagree, disagree
