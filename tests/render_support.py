"""Validation helpers for rendered manifests (tests only): real schemas, strict walks, webhook rules.

Schemas are the ones bundled in the package (``ddpctl.schemas``, vendored with their sources and licence);
nothing outside the repository is read.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator

from ddpctl import schemas

REPO = Path(__file__).resolve().parents[1]
K8S_VERSION = "1.33.0"  # TrainJob v2.3.0 needs Kubernetes >= 1.31
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
PET_VARS = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}


# ------------------------------------------------------------------------------------------------ compose


@functools.lru_cache(maxsize=None)
def compose_validator():
    import jsonschema

    return jsonschema.Draft7Validator(schemas.compose_schema())


def compose_schema_errors(doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in compose_validator().iter_errors(doc)]


def docker_compose_config(path: Path) -> subprocess.CompletedProcess:
    """The real docker-compose 1.x client's verdict on a file (no daemon needed for ``config``)."""
    return subprocess.run(["docker-compose", "-f", str(path), "config", "-q"], capture_output=True, text=True,
                          cwd=path.parent, timeout=120)


# ------------------------------------------------------------------------------------------------- CRDs


@functools.lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict:
    return schemas.crd_schema(kind)


def unknown_keys(doc: Any, schema: dict, path: str = "") -> list[str]:
    """Keys the schema does not declare, wherever it lists ``properties`` (the CRD itself allows them)."""
    out: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if isinstance(doc, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in doc.items():
            if props is not None and key in props:
                out += unknown_keys(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += unknown_keys(value, extra, f"{path}.{key}")
            elif props is not None or extra is False:
                out.append(f"{path}.{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(doc):
            out += unknown_keys(item, schema["items"], f"{path}[{i}]")
    return out


def crd_errors(doc: dict) -> list[str]:
    """openAPIV3Schema (Draft 7) errors plus unknown keys."""
    import jsonschema

    schema = crd_schema(doc["kind"])
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    metadata_keys = {"name", "namespace", "labels", "annotations", "generateName"}
    errors += [f"unknown metadata key {k}" for k in doc.get("metadata", {}) if k not in metadata_keys]
    return errors + [f"unknown key {k}" for k in unknown_keys(doc, schema)]


def pytorchjob_webhook_errors(job: dict) -> list[str]:
    """The Training Operator v1.9.4 webhook rules (pytorchjob_webhook.go L75-160) plus the name rule."""
    errors = []
    name = job["metadata"]["name"]
    if not _DNS1035.match(name) or len(name) > 63:
        errors.append(f"name {name!r} is not a DNS-1035 label")
    spec = job["spec"]
    replicas = spec.get("pytorchReplicaSpecs", {})
    for rtype, rspec in replicas.items():
        if rtype not in ("Master", "Worker"):
            errors.append(f"replica type {rtype} is not allowed")
        containers = rspec.get("template", {}).get("spec", {}).get("containers", [])
        if not containers:
            errors.append(f"{rtype} has no containers")
        if not any(c.get("name") == "pytorch" for c in containers):
            errors.append(f"{rtype} has no container named pytorch")
        if any(not c.get("image") for c in containers):
            errors.append(f"{rtype} has a container without an image")
    if "Master" in replicas and replicas["Master"].get("replicas") != 1:
        errors.append("Master.replicas must be set to exactly 1")
    if "Worker" in replicas and int(replicas["Worker"].get("replicas", 1)) < 1:
        errors.append("Worker.replicas must be at least 1")
    if "elasticPolicy" in spec and "Worker" not in replicas:
        errors.append("elasticPolicy needs a Worker spec")
    for rspec in replicas.values():
        if rspec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never", "ExitCode"):
            errors.append(f"restartPolicy {rspec.get('restartPolicy')!r} is not valid")
    rp = spec.get("runPolicy", {})
    if rp.get("cleanPodPolicy") not in (None, "All", "Running", "None"):
        errors.append(f"cleanPodPolicy {rp.get('cleanPodPolicy')!r} is not valid")
    return errors


def trainjob_webhook_errors(job: dict) -> list[str]:
    """Trainer v2.3.0 rules: RFC-1035 name (CEL), no PET_* in trainer.env (torch.go L65-77), runtime set."""
    errors = []
    name = job["metadata"]["name"]
    if not _DNS1035.match(name) or len(name) > 63:
        errors.append(f"name {name!r} is not an RFC-1035 label of at most 63 characters")
    spec = job["spec"]
    if not spec.get("runtimeRef", {}).get("name"):
        errors.append("runtimeRef.name is required")
    trainer = spec.get("trainer", {})
    for item in trainer.get("env", []):
        if item["name"] in PET_VARS:
            errors.append(f"trainer.env sets {item['name']}")
    if int(trainer.get("numNodes", 1)) < 1:
        errors.append("numNodes must be at least 1")
    if len(spec.get("runtimePatches", [])) > 16:
        errors.append("at most 16 runtimePatches")
    if len(trainer.get("image", "")) > 500:
        errors.append("image longer than 500 characters")
    return errors


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

_FAKE_SRUN = """#!/usr/bin/env python3
# (a '#!' line cannot hold an interpreter path with a space; any python3 on PATH records the call)
import json, os, sys
with open(os.environ["FAKE_SRUN_OUT"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, fh)
"""
_FAKE_SCONTROL = """#!/bin/sh
[ "$1" = show ] && [ "$2" = hostnames ] || exit 3
i=1; while [ "$i" -le "$SLURM_JOB_NUM_NODES" ]; do echo "gpu-node-$i"; i=$((i+1)); done
"""


def run_sbatch(script: str, tmp: Path, nodes: int, job_id: str = "4242") -> dict:
    """Execute an sbatch script with bash, with ``srun`` and ``scontrol`` replaced by recorders.

    Returns what srun received: ``argv`` (its argument list) and ``env``. Nothing of the job itself runs.
    """

    bin_dir = tmp / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "srun").write_text(_FAKE_SRUN.format())
    (bin_dir / "scontrol").write_text(_FAKE_SCONTROL)
    for f in ("srun", "scontrol"):
        (bin_dir / f).chmod(0o755)
    path = tmp / "job.sbatch"
    path.write_text(script)
    out = tmp / "srun.json"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SRUN_OUT": str(out), "SLURM_JOB_ID": job_id,
           "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_JOB_NODELIST": f"gpu-node-[1-{nodes}]", "HOME": str(tmp)}
    result = subprocess.run(["bash", str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"script failed ({result.returncode}): {result.stderr}")
    return json.loads(out.read_text())
