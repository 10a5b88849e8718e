"""The job spec: one frozen, validated description of a distributed training job.

A spec comes from a YAML file (``-f job.yaml``), from CLI flags, or both (flags win). It is inert data: no
environment, clock, network or file access happens here except in :func:`load_spec`, which reads the YAML file and
nothing else. Everything downstream (launch contract, renderers, local engine) takes a :class:`JobSpec` and never
mutates it. Errors name the offending key, its line in the file when it came from one, and the fix.

The parts:

- :mod:`~ddpctl.spec.model`   the frozen dataclasses and defaults (no checks, no I/O)
- :mod:`~ddpctl.spec.fields`  THE field table: every key's check and CLI flag, declared once
- :mod:`~ddpctl.spec.checks`  the check primitives the table uses (one-line errors with key and line)
- :mod:`~ddpctl.spec.build`   ``spec_from_dict`` (table + cross-field rules) and ``spec_to_dict``
- :mod:`~ddpctl.spec.source`  YAML with line numbers, ``load_spec``, host path resolution
- :mod:`~ddpctl.spec.merge`   flags over file
- :mod:`~ddpctl.spec.units`   size parsing and formatting
"""

from __future__ import annotations

from ddpctl.spec.build import spec_from_dict, spec_to_dict
from ddpctl.spec.model import (
    DEFAULT_COMMAND,
    DEFAULT_CPU_IMAGE,
    DEFAULT_GPU_IMAGE,
    DEFAULT_NAME,
    DEFAULT_PORT,
    MAX_GPUS_PER_NODE,
    MAX_NAME_LEN,
    MAX_NODES,
    JobSpec,
    KubernetesOptions,
    NcclOptions,
    SlurmOptions,
    Volume,
    WorkspaceOptions,
)
from ddpctl.spec.source import load_spec, resolve_host_path
from ddpctl.spec.units import format_size, parse_size

__all__ = [
    "DEFAULT_COMMAND", "DEFAULT_CPU_IMAGE", "DEFAULT_GPU_IMAGE", "DEFAULT_NAME", "DEFAULT_PORT",
    "MAX_GPUS_PER_NODE", "MAX_NAME_LEN", "MAX_NODES", "JobSpec", "KubernetesOptions", "NcclOptions",
    "SlurmOptions", "Volume", "WorkspaceOptions", "format_size", "load_spec", "parse_size", "resolve_host_path", "spec_from_dict",
    "spec_to_dict",
]
