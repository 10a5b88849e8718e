"""Schemas bundled with ddpctl (see SOURCES.md beside this file): the Compose spec, the Kubeflow CRDs and copies
of ddp_train's progress record and summary schemas.

Read at run time by the validator and by the tests; nothing outside the installed package is consulted.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

COMPOSE = "compose-spec.json"
RECORD_FILES = {"progress": "progress.schema.json", "summary": "summary.schema.json"}  # copies of ddp_train's
CRD_FILES = {
    "PyTorchJob": "kubeflow.org_pytorchjobs.yaml",  # Kubeflow Training Operator v1.9.4
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",  # Kubeflow Trainer v2.3.0
}


def read_text(name: str) -> str:
    """The text of one bundled schema file."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def compose_schema() -> dict[str, Any]:
    return json.loads(read_text(COMPOSE))


@functools.lru_cache(maxsize=None)
def crd(kind: str) -> dict[str, Any]:
    """The whole CustomResourceDefinition of ``kind`` (PyTorchJob or TrainJob)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(read_text(CRD_FILES[kind]), Loader=loader)


@functools.lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of the served storage version of ``kind``."""
    versions = [v for v in crd(kind)["spec"]["versions"] if v.get("served", True) and v.get("storage", True)]
    if len(versions) != 1:
        raise ValueError(f"{CRD_FILES[kind]}: expected one served storage version, found {len(versions)}")
    return versions[0]["schema"]["openAPIV3Schema"]


@functools.lru_cache(maxsize=None)
def record_schema(event: str) -> dict[str, Any]:
    """The schema of a job's ``progress`` record or ``summary`` line (a copy of ddp_train's)."""
    return json.loads(read_text(RECORD_FILES[event]))
