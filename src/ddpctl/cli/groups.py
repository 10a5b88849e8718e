"""Registers every command group on the root app. One module per group:

- ``render``  -> ddpctl.cli.render   (compose | pytorchjob | trainjob | slurm)
- ``image``   -> ddpctl.cli.image    (build | base | check)
- ``up`` -> ddpctl.cli.up; ``ps/logs/down`` -> ddpctl.cli.cluster (which registers ``up`` first)
- ``bench``   -> ddpctl.cli.bench
- ``doctor``  -> ddpctl.cli.doctor
- ``validate`` -> ddpctl.cli.validate

Each module imports its heavy dependencies (docker, matplotlib) inside the commands, so registering them
all keeps ``ddpctl --help`` fast.
"""

from __future__ import annotations

from ddpctl.cli import bench, cluster, doctor, image, render, validate, watch  # noqa: F401  (each registers its commands on `app`)
