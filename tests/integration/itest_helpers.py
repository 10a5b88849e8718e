"""Helpers shared by the integration tests (imported as a plain module: tests/integration is on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# DDPCTL_TEST_IMAGE: run the tests on another tag (e.g. an image built from a scratch merge)
CPU_IMAGE = os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu")
MANAGED = "app.kubernetes.io/managed-by=ddpctl"
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))


def ddpctl(*args: str, cwd=None, env=None, timeout=240, check=False) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.update(env or {})
    proc = subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"ddpctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def labelled(client, job: str) -> tuple[list[str], list[str]]:
    f = {"label": f"ddpctl.job={job}"}
    return ([c.name for c in client.containers.list(all=True, filters=f)],
            [n.name for n in client.networks.list(filters=f)])
