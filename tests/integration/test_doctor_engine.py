"""``ddpctl doctor`` against the real, shared Docker Engine (CPU job: no GPU checks)."""

from __future__ import annotations

import json

from itest_helpers import ddpctl
from ports import free_port


def test_doctor_local_on_the_real_engine(engine):
    proc = ddpctl("doctor", "--json", "--port", str(free_port("0.0.0.0")))
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    version = engine.version()["Version"]
    assert checks["docker"]["status"] == "ok" and version in checks["docker"]["detail"]
    assert "nvidia runtime" not in checks  # no GPUs asked for
    assert proc.returncode == (1 if any(c["status"] == "fail" for c in report["checks"]) else 0)
    assert report["ok"] is (proc.returncode == 0)


def test_doctor_gpu_job_on_an_engine_without_nvidia_support(engine, tmp_path):
    # The shared engine has no 'nvidia' runtime, no CDI spec and (here) no hook or nvidia-smi: both fail.
    proc = ddpctl("doctor", "--gpus-per-node", "1", "--port", str(free_port("0.0.0.0")),
                  env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1
    assert any(x.startswith("fail  nvidia runtime:") and "nvidia-ctk runtime configure" in x
               for x in proc.stdout.splitlines()), proc.stdout
    assert any(x.startswith("fail  GPUs:") for x in proc.stdout.splitlines())
