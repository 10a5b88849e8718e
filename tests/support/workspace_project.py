"""A third-party-style project for the workspace tests: its own train.py on torchrun's env contract (gloo) and a
requirements.txt naming one pure-Python package from a wheelhouse made here (tests/integration/test_workspace_e2e.py,
tests/slurm/test_workspace_slurm.py)."""

from __future__ import annotations

from pathlib import Path

from itest_helpers import make_wheel, own_requirements

TRAIN = '''\
import os

import torch
import torch.distributed as dist

import wsprobe

dist.init_process_group("gloo")  # torchrun's env contract: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, t
print(f"workspace-train rank {rank}/{world} node {os.environ['GROUP_RANK']} sum {t.item():.0f} "
      f"probe {wsprobe.VALUE} cwd {os.getcwd()}", flush=True)
dist.destroy_process_group()
'''


def make_project(root: Path) -> tuple[Path, Path]:
    """The user's project and a wheelhouse with its one requirement (a pure-Python wheel made here)."""
    proj = root / "my-project"
    proj.mkdir(parents=True)
    (proj / "train.py").write_text(TRAIN)
    (proj / "requirements.txt").write_text(own_requirements("wsprobe==1.0"))
    house = make_wheel(root / "wheelhouse", "wsprobe", "1.0", "VALUE = 4242\n").parent
    return proj, house
