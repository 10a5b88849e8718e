"""Fault injection for the tests, behind the hidden --debug-* flags, in one call after every training step:
a sample log per rank, a sleep per step, a planted divergence on one rank, one rank dying at a step. The flags
that change how a run is built (--debug-skip-grad-sync, --debug-reducer-in-eager,
--debug-per-step-buffer-broadcast, --debug-compile-backend) are read where it is built (config, parts)."""

from __future__ import annotations

import os
import sys
import time

import torch

from ddp_train.config.run_config import RunConfig

EXIT_SIMULATED_CRASH = 17  # --debug-exit-rank: the code a crashed peer leaves with


def after_step(config: RunConfig, *, rank, world, epoch, step_in_epoch, global_step, loader, core) -> None:
    if config.debug_sample_log and getattr(loader, "last_indices", None) is not None:
        os.makedirs(config.debug_sample_log, exist_ok=True)
        with open(os.path.join(config.debug_sample_log, f"samples-rank{rank}.txt"), "a") as f:
            f.write(f"{epoch} {step_in_epoch} {world} " + ",".join(map(str, loader.last_indices.tolist())) + "\n")
    if config.debug_step_sleep:
        time.sleep(config.debug_step_sleep)
    if config.debug_perturb_rank is not None and rank == config.debug_perturb_rank and global_step == 1:
        with torch.no_grad():
            next(core.parameters()).add_(1e-3)
    if config.debug_exit_rank is not None and rank == config.debug_exit_rank and global_step == config.debug_exit_step:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_SIMULATED_CRASH)  # simulate a crashed peer
