"""Validation helpers for rendered manifests (tests only).

The checks are the package's own validator (:mod:`ddpctl.validate`, what ``ddpctl validate`` runs: the schemas
bundled in ``ddpctl.schemas`` read strictly, Kubernetes and webhook rules, docker-compose 1.29.2 rules), so the
tests and the users' command share one copy. Two independent real validators are added here: the real
docker-compose 1.x client and kubernetes-validate's core PodTemplate schema. Nothing outside the repository is
read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from ddpctl.validate import check_document, k8s

REPO = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.33.0"  # TrainJob v2.3.0 needs Kubernetes >= 1.31


def _fmt(issues) -> list[str]:
    from ddpctl.validate import format_path

    return [f"{format_path(i.path)}: {i.message}" for i in issues]


# ------------------------------------------------------------------------------------------------ compose


def compose_schema_errors(doc: dict) -> list[str]:
    """The Compose spec's JSON schema alone (strict), as the package validator reads it."""
    from ddpctl.validate import schema_validator

    return _fmt(schema_validator("compose").issues(doc))


def compose_errors(doc: dict) -> list[str]:
    """Everything ``ddpctl validate`` reports for a compose document (schema + 1.29.2 + engine rules)."""
    return _fmt(check_document(doc, "compose"))


def docker_compose_config(path: Path) -> subprocess.CompletedProcess:
    """The real docker-compose 1.x client's verdict on a file (no daemon needed for ``config``)."""
    return subprocess.run(["docker-compose", "-f", str(path), "config", "-q"], capture_output=True, text=True,
                          cwd=path.parent, timeout=120)


# ------------------------------------------------------------------------------------------------- CRDs


def crd_errors(doc: dict) -> list[str]:
    """Everything ``ddpctl validate`` reports for a PyTorchJob / TrainJob: the CRD's openAPIV3Schema
    (strict: unknown keys are errors), ObjectMeta and pod rules, the webhook and CEL rules."""
    return _fmt(check_document(doc, doc["kind"]))


def pytorchjob_webhook_errors(job: dict) -> list[str]:
    """The Training Operator v1.9.4 webhook rules and pod rules alone (ddpctl.validate.k8s)."""
    return _fmt(k8s.pytorchjob(job))


def trainjob_webhook_errors(job: dict) -> list[str]:
    """The Trainer v2.3.0 webhook rules and pod rules alone (ddpctl.validate.k8s)."""
    return _fmt(k8s.trainjob(job))


def pod_templates(job: dict) -> Iterator[tuple[str, dict]]:
    if job["kind"] == "PyTorchJob":
        for rtype, rspec in job["spec"]["pytorchReplicaSpecs"].items():
            yield rtype, rspec["template"]
    else:
        for patch in job["spec"].get("runtimePatches", []):
            for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                yield rj["name"], rj["template"]["spec"]["template"]


def pod_template_errors(template: dict) -> list[str]:
    """Validate as a core v1 PodTemplate in strict mode with kubernetes-validate (offline, bundled schemas)."""
    import kubernetes_validate

    doc = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [str(exc).splitlines()[0]]
    return []


# -------------------------------------------------------------------------------------------------- Slurm

STORE_WAIT = 60  # seconds

_FAKE_SRUN = """#!/bin/sh
# Ignore SIGTERM first: the script kills the store's (backgrounded) srun when it exits; record it anyway.
trap '' TERM
exec "{python}" "$0.py" "$@"
"""
_FAKE_SRUN_PY = """import json, os, sys, time
# The rendezvous store's step (srun --overlap ... &) goes to its own file; the training step to FAKE_SRUN_OUT.
out = os.environ["FAKE_SRUN_OUT"]
store = out.replace(".json", "-store.json")
if "--overlap" in sys.argv[1:]:
    out = store
elif os.environ.get("FAKE_SRUN_STORE_WAIT"):
    # As a real training step's agents wait for the store: the script ends, and kills the store's step, only
    # after the store's srun is up (on a loaded machine it may not have run its first line yet).
    deadline = time.monotonic() + float(os.environ["FAKE_SRUN_STORE_WAIT"])
    while not os.path.exists(store) and time.monotonic() < deadline:
        time.sleep(0.02)
with open(out + ".tmp", "w") as fh:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, fh)
os.replace(out + ".tmp", out)
"""
_FAKE_SCONTROL = """#!/bin/sh
[ "$1" = show ] && [ "$2" = hostnames ] || exit 3
i=1; while [ "$i" -le "$SLURM_JOB_NUM_NODES" ]; do echo "gpu-node-$i"; i=$((i+1)); done
"""


def run_sbatch(script: str, tmp: Path, nodes: int, job_id: str = "4242", extra_env: dict | None = None) -> dict:
    """Execute an sbatch script with bash, with ``srun`` and ``scontrol`` replaced by recorders.

    Returns what the training step's srun received: ``argv`` (its argument list) and ``env``, plus ``store``:
    the same for the rendezvous store's step. Nothing of the job itself runs.
    ``extra_env``: more of the submitting environment (sbatch passes it on).
    """

    bin_dir = tmp / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "srun").write_text(_FAKE_SRUN.format(python=sys.executable))
    (bin_dir / "srun.py").write_text(_FAKE_SRUN_PY)
    (bin_dir / "scontrol").write_text(_FAKE_SCONTROL)
    for f in ("srun", "scontrol"):
        (bin_dir / f).chmod(0o755)
    path = tmp / "job.sbatch"
    path.write_text(script)
    out = tmp / "srun.json"
    store = tmp / "srun-store.json"
    store.unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SRUN_OUT": str(out), "SLURM_JOB_ID": job_id,
           "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_JOB_NODELIST": f"gpu-node-[1-{nodes}]", "HOME": str(tmp),
           **({"FAKE_SRUN_STORE_WAIT": str(STORE_WAIT)} if "--overlap" in script else {}), **(extra_env or {})}
    result = subprocess.run(["bash", str(path)], cwd=tmp, env=env, capture_output=True, text=True,
                            timeout=60 + STORE_WAIT)
    if result.returncode != 0:
        raise AssertionError(f"script failed ({result.returncode}): {result.stderr}")
    got = json.loads(out.read_text())
    # the store's srun runs in the background (&); the training step's recorder waited for it, so it is there
    # unless it never started
    deadline = time.monotonic() + STORE_WAIT
    while not store.exists():
        assert time.monotonic() < deadline, f"the store step's srun wrote no {store.name} within {STORE_WAIT} s"
        time.sleep(0.05)
    got["store"] = json.loads(store.read_text())
    return got
