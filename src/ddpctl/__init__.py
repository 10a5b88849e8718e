"""ddpctl: one job spec -> multi-GPU, multi-node PyTorch DDP runs, from the shell or from Python.

The Python API (docs/api.md), on which the ``ddpctl`` command is built::

    import ddpctl

    ddpctl.run(fn, *args, nodes=2)            # fn(*args) on every rank, the return values in rank order
    job = ddpctl.up(nodes=2, command=[...])   # a job on the local Docker Engine -> Job
    job.status(); job.logs(follow=True); job.wait(); job.down()
    ddpctl.job("ddp"); ddpctl.jobs()          # existing jobs, also after down (their kept output)
    ddpctl.render("pytorchjob", nodes=4)      # the text of 'ddpctl render pytorchjob -n 4'
    ddpctl.validate("k8s/")                   # 'ddpctl validate k8s/' as a report
    ddpctl.bench("out", workloads=["toy"])    # 'ddpctl bench' -> Report

Bad input raises :class:`BadInput` with the one-line message and fix that ``ddpctl`` prints; every error is a
:class:`DdpctlError`. The names are imported on first use: ``import ddpctl`` itself imports nothing heavy (no
torch, no docker), and ``ddpctl --help`` stays fast.

``ddpctl.render``, ``ddpctl.validate`` and ``ddpctl.bench`` are the functions; the packages of the same name are
imported with ``from ddpctl.render import ...`` (an import of such a package leaves the function in place).
Type checkers and editors read the names from ``__init__.pyi``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "BadInput", "DdpctlError", "Job", "JobFailed", "JobStatus", "NodeStatus", "Outcome", "Progress", "RankStatus",
    "RemoteError", "Removed", "Report", "ValidationReport", "bench", "job", "jobs", "render", "run", "up", "validate",
]

# name -> (module, attribute): imported on first use (PEP 562)
_LAZY = {
    "BadInput": ("ddpctl.errors", "BadInput"),
    "DdpctlError": ("ddpctl.errors", "DdpctlError"),
    "JobFailed": ("ddpctl.errors", "JobFailed"),
    "Job": ("ddpctl.api.jobs", "Job"),
    "Outcome": ("ddpctl.api.job_outcome", "Outcome"),
    "Removed": ("ddpctl.api.job_output", "Removed"),
    "up": ("ddpctl.api.jobs", "up"),
    "job": ("ddpctl.api.jobs", "job"),
    "jobs": ("ddpctl.api.jobs", "jobs"),
    "JobStatus": ("ddpctl.api.job_status", "JobStatus"),
    "NodeStatus": ("ddpctl.api.job_status", "NodeStatus"),
    "RankStatus": ("ddpctl.api.job_status", "RankStatus"),
    "Progress": ("ddpctl.api.job_status", "Progress"),
    "render": ("ddpctl.api.manifests", "render"),
    "validate": ("ddpctl.api.manifests", "validate"),
    "ValidationReport": ("ddpctl.validate", "Report"),
    "bench": ("ddpctl.api.benchmark", "bench"),
    "Report": ("ddpctl.api.benchmark", "Report"),
    "run": ("ddpctl.api.function_run", "run"),
    "RemoteError": ("ddpctl.api.function_run", "RemoteError"),
}

# API functions named as a subpackage: importing the subpackage must not replace the function
_SHADOWED = frozenset({"render", "validate", "bench"})


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'ddpctl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The ``ddpctl`` module: the import system sets ``ddpctl.render`` to the subpackage once it is imported;
    here that attribute stays the API function (the subpackage is in ``sys.modules``, as ever)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
