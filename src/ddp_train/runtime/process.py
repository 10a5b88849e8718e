"""This process in the job: threads, launch, strategy, device, process group, rank; and its output helpers."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

from ddp_train.config.run_config import RunConfig
from ddp_train.config.run_plan import strategy_for
from ddp_train.runtime import threads as threads_mod
from ddp_train.runtime.distributed import detect, init, pick_device, resolve_backend
from ddp_train.visible import visible


class Runtime:
    def __init__(self, config: RunConfig):
        self.quiet = config.quiet
        self.t0 = time.monotonic()
        self.threads = threads_mod.apply()  # OMP_NUM_THREADS and torch's intra-op threads, before any work
        self.launch = L = detect(config)
        self.strategy = strategy_for(config, L.world_size, L.mode)
        if config.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        self.device = pick_device(config, L)
        self.cuda = self.device.type == "cuda"
        # No cuDNN autotuning under DataParallel: its per-forward worker threads start with an empty
        # thread-local benchmark cache, so every step would re-benchmark every convolution (measured on 2x H100:
        # 644 ms per ResNet-18 step instead of ~66 ms).
        bench = config.cudnn_benchmark if config.cudnn_benchmark is not None else \
            (not config.deterministic and self.strategy != "dp")
        torch.backends.cudnn.benchmark = self.cuda and bench
        self.backend = resolve_backend(config, self.device) if self.strategy == "ddp" else None
        if self.strategy == "ddp":
            init(config, L, self.backend, self.device)
        self.rank = L.rank if self.strategy == "ddp" else 0
        self.world = L.world_size if self.strategy == "ddp" else 1
        self.is0 = self.rank == 0
        self.distributed = self.strategy == "ddp" and dist.is_initialized()
        self.multi = self.distributed and self.world > 1  # collectives between ranks

    def say(self, msg):
        if self.is0 and not self.quiet:
            # one write with its newline: the local ranks share torchrun's stdout, and print() writes the text
            # and the newline apart, so another rank's progress record could land inside this line
            sys.stdout.write(msg + "\n")
            sys.stdout.flush()

    def warn(self, msg):
        if self.is0:
            print(f"ddp-train: warning: {visible(msg)}", file=sys.stderr, flush=True)

    def sync_device(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def close(self, *, graph_captured: bool):
        """Leave the process group once every rank is done."""
        if self.distributed and dist.is_initialized():
            # Everyone is done before anyone tears down: a rank that leaves while a peer still talks to it
            # makes gloo abort ("terminate called without an active exception").
            dist.barrier()
            if graph_captured:
                # A CUDA graph that holds NCCL kernels keeps the communicator busy: destroy_process_group then
                # waits forever (seen on 2x/4x H200, torch 2.11, NCCL 2.28). The process leaves with os._exit
                # right after this (ddp_train.__main__), which frees both.
                self.sync_device()
                return
            dist.destroy_process_group()
