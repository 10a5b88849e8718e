"""Registers every command group on the root app. One module per group:

- ``render``  -> ddpctl.cli.render   (compose | pytorchjob | trainjob | slurm)
- ``image``   -> ddpctl.cli.image    (build | base | check)
- ``up/ps/logs/down`` -> ddpctl.cli.cluster
- ``bench``   -> ddpctl.cli.bench
"""

from __future__ import annotations

import importlib

for _module in ("render", "image", "cluster", "bench"):
    try:
        importlib.import_module(f"ddpctl.cli.{_module}")
    except ModuleNotFoundError as exc:  # a group not written yet
        if exc.name != f"ddpctl.cli.{_module}":
            raise
