"""What ``Trainer.setup`` builds, part by part, for the tests of the parts (test_parts.py, test_checkpoint_state.py):
one CPU process, real torch."""

from __future__ import annotations

import os
import random

import torch

from ddp_train.comm import compression
from ddp_train.config import run_plan
from ddp_train.config.settings import WORKLOAD_DEFAULTS, parse_args
from ddp_train.data import inputs
from ddp_train.model import parts
from ddp_train.runtime.process import Runtime

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "2",
        "--strategy", "single", "--quiet", "--deterministic"]


def build(argv):
    """(config, runtime, numerics, inputs, run plan, parts) of a run with these flags, before ``parts.wrap``."""
    a = parse_args(argv)
    rt = Runtime(a)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    num = parts.numerics(a, rt)
    inp = inputs.build(a, rt, WORKLOAD_DEFAULTS[a.workload], per_rank_batch=a.batch_size, amp_dtype=num.amp_dtype,
                       channels_last=num.channels_last)
    spe = len(inp.loader)
    comm = compression.decide(compression=a.grad_compression, graph_reducer=a.graph_reducer, bucket_mb=a.bucket_mb,
                              device=rt.device, world=rt.world, distributed=rt.distributed)  # as Trainer does
    plan = run_plan.decide(a, comm, device_type=rt.device.type, strategy=rt.strategy, precision=num.precision,
                           planned_steps=spe * a.epochs, stop_at=spe * a.epochs, distributed=rt.distributed,
                           torch_dir=os.path.dirname(torch.__file__))
    p = parts.build(a, rt, graph_mode=plan.graph_mode, shape=tuple(inp.train_split.images.shape[1:]), num_classes=10,
                    global_batch=a.batch_size, steps_per_epoch=spe, total_steps=spe * a.epochs, num=num)
    return a, rt, num, inp, plan, p
