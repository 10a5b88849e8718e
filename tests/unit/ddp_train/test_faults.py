"""ddp_train.loop.faults: the test hooks run after a step (sample log, perturbation) in one call."""

from __future__ import annotations

import argparse

import torch

from ddp_train.config.settings import parse_args
from ddp_train.loop import faults


def test_faults_are_one_call_after_a_step(tmp_path):
    config = parse_args(["--debug-sample-log", str(tmp_path), "--debug-perturb-rank", "1"])
    assert (config.debug_step_sleep, config.debug_exit_rank, config.debug_exit_step) == (0.0, None, 1)
    loader = argparse.Namespace(last_indices=torch.tensor([3, 1, 2]))
    core = torch.nn.Linear(2, 2)
    w = core.weight.detach().clone()
    faults.after_step(config, rank=0, world=2, epoch=0, step_in_epoch=1, global_step=1, loader=loader, core=core)
    assert torch.equal(core.weight, w)  # rank 0 is not the one to perturb
    faults.after_step(config, rank=1, world=2, epoch=0, step_in_epoch=1, global_step=1, loader=loader, core=core)
    assert not torch.equal(core.weight, w)
    assert (tmp_path / "samples-rank0.txt").read_text() == "0 1 2 3,1,2\n"
