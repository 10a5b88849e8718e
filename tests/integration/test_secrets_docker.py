"""`ddpctl up --secret-env` on the real Docker Engine: the process gets the caller's value; no plan shows it."""

from __future__ import annotations

import json

from itest_helpers import ddpctl

TOKEN = "hf_itest-not-a-real-token"
SCRIPT = "import json, os; print(json.dumps({'event': 'secret', 'value': os.environ.get('HF_TOKEN')}))"


def test_up_passes_the_secret_from_its_environment(engine, cpu_image, job_name):
    dry = ddpctl("up", "--name", job_name, "--image", cpu_image, "--secret-env", "HF_TOKEN", "--dry-run",
                 env={"HF_TOKEN": TOKEN})
    assert dry.returncode == 0 and TOKEN not in dry.stdout + dry.stderr
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--secret-env", "HF_TOKEN", "--rm",
                  "--", "python", "-c", SCRIPT, env={"HF_TOKEN": TOKEN})
    assert proc.returncode == 0, proc.stderr
    seen = [json.loads(line.split(" | ", 1)[-1]) for line in proc.stdout.splitlines() if '"secret"' in line]
    assert seen == [{"event": "secret", "value": TOKEN}]
    assert TOKEN not in proc.stderr


def test_up_without_the_secret_creates_nothing(engine, cpu_image, job_name):
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--secret-env", "ITEST_DDP_UNSET_TOKEN")
    assert proc.returncode == 2 and "is not set in this environment" in proc.stderr
    f = {"label": f"ddpctl.job={job_name}"}
    assert engine.containers.list(all=True, filters=f) == [] and engine.networks.list(filters=f) == []
