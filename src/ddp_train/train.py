"""The training run: setup, loop, evaluation, checkpoints, sync check and the summary line."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

from . import checkpoint as ckpt_mod
from . import compilescope, preempt, stepmode
from . import data as data_mod
from . import summary as summary_mod
from . import sync as sync_mod
from . import threads as threads_mod
from .config import WORKLOAD_DEFAULTS
from .distributed import detect, init, pick_device, resolve_backend
from .errors import EXIT_CHECKPOINT, EXIT_PREEMPTED, EXIT_USAGE, Preempted, TrainError
from .flatreduce import BucketedAllReduce, FlatAllReduce
from .metrics import GpuStats, MetricsFile, Progress, ProgressRecords, device_name
from .models import build_model, convert_sync_bn
from .profiler import StepProfiler
from .steptimer import StepTimer
from .summary import Outcome


class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        self.threads = threads_mod.apply()  # OMP_NUM_THREADS and torch's intra-op threads, before any work
        self.launch = detect(args)
        a, L = args, self.launch
        if a.strategy in ("dp", "single") and L.world_size > 1:
            raise TrainError(f"--strategy {a.strategy} runs in one process, but this launch has world size "
                             f"{L.world_size}; use --strategy ddp or start one process", EXIT_USAGE)
        self.strategy = a.strategy
        if a.strategy == "ddp" and L.mode == "single":
            self.strategy = "single"  # one plain process: nothing to be data-parallel with
        if a.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True)
        self.device = pick_device(a, L)
        self.cuda = self.device.type == "cuda"
        # No cuDNN autotuning under DataParallel: its per-forward worker threads start with an empty
        # thread-local benchmark cache, so every step would re-benchmark every convolution (measured on 2x H100:
        # 644 ms per ResNet-18 step instead of ~66 ms).
        bench = a.cudnn_benchmark if a.cudnn_benchmark is not None else (not a.deterministic and self.strategy != "dp")
        torch.backends.cudnn.benchmark = self.cuda and bench
        self.backend = resolve_backend(a, self.device) if self.strategy == "ddp" else None
        if self.strategy == "ddp":
            init(a, L, self.backend, self.device)
        self.rank = L.rank if self.strategy == "ddp" else 0
        self.world = L.world_size if self.strategy == "ddp" else 1
        self.is0 = self.rank == 0
        self.distributed = self.strategy == "ddp" and dist.is_initialized()

    # ------------------------------------------------------------------------------------- output
    def say(self, msg):
        if self.is0 and not self.args.quiet:
            print(msg, flush=True)

    def warn(self, msg):
        if self.is0:
            print(f"ddp-train: warning: {msg}", file=sys.stderr, flush=True)

    def sync_device(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    # ------------------------------------------------------------------------------------- setup
    def setup(self):
        a, d = self.args, WORKLOAD_DEFAULTS[self.args.workload]
        torch.manual_seed(a.seed)  # same initial weights on every rank (DDP also broadcasts rank 0's)
        random.seed(a.seed + self.rank)
        self.pipeline = "device" if a.data_pipeline == "auto" else a.data_pipeline
        self.precision = a.precision if a.precision != "auto" else ("bf16" if self.cuda else "fp32")
        self.channels_last = a.channels_last if a.channels_last is not None else self.cuda
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        self.n_dp = torch.cuda.device_count() if (self.strategy == "dp" and self.cuda) else 1
        self.per_rank_batch = a.batch_size * self.n_dp
        self.global_batch = self.per_rank_batch * self.world

        data_device = self.device if self.pipeline == "device" else torch.device("cpu")
        splits = data_mod.load_splits(a, d.shape, d.num_classes, data_device)
        self.train_split, self.test_split = splits["train"], splits["test"]
        shape = tuple(self.train_split.images.shape[1:])
        data_mod.check_batch(self.train_split.length, self.world, self.per_rank_batch)
        mean, std = data_mod.NORMALIZATION[a.workload]
        in_dtype = self.amp_dtype if (self.amp_dtype and self.cuda) else torch.float32
        common = dict(batch=self.per_rank_batch, rank=self.rank, world=self.world, seed=a.seed, pad=d.pad,
                      flip=d.flip, augment=not a.no_augment, mean=mean, std=std,
                      channels_last=self.channels_last, device=self.device)
        if self.pipeline == "device":
            self.loader = data_mod.DeviceLoader(self.train_split, out_dtype=in_dtype, **common)
        else:
            workers = a.workers if a.workers is not None else (4 if self.cuda else 0)
            self.workers = workers
            if self.pipeline == "classic":
                from .classic import SeedLoader

                self.loader = SeedLoader(self.train_split, workers=workers,
                                         **common)
            else:
                self.loader = data_mod.ClassicLoader(self.train_split, out_dtype=torch.float32, workers=workers,
                                                     **common)
        self.eval_norm = data_mod.DeviceLoader(
            self.test_split, out_dtype=in_dtype, **{**common, "augment": False, "batch": max(1, a.batch_size)})
        self.steps_per_epoch = len(self.loader)
        self.total_steps = self.steps_per_epoch * a.epochs
        self.stop_at = min(self.total_steps, a.max_steps) if a.max_steps else self.total_steps
        self.warmup_steps = a.warmup_steps if a.warmup_steps is not None else min(5, self.stop_at // 5)
        if self.warmup_steps >= self.stop_at:
            raise TrainError(f"--warmup-steps {self.warmup_steps} leaves no timed step out of {self.stop_at}; "
                             "lower it or raise --max-steps/--epochs", EXIT_USAGE)
        self.log_interval = a.log_interval or max(1, self.steps_per_epoch // 10)
        # planned on the whole run (a resumed run plans the same way, so it picks the same mode)
        self.step_plan = stepmode.plan_step(
            requested=a.step_mode, device_type=self.device.type, strategy=self.strategy, precision=self.precision,
            compile=a.compile, compile_mode=a.compile_mode, sync_bn=a.sync_bn, grad_compression=a.grad_compression,
            planned_steps=self.stop_at, distributed=self.strategy == "ddp" and self.distributed,
            graph_reducer=a.graph_reducer, compile_if_repaid=a.compile_if_repaid,
            compile_blocker=None if a.debug_compile_backend not in (None, "inductor")  # no C++ build then
            else stepmode.compile_blocker(os.path.dirname(torch.__file__)))
        self.graph_mode = self.step_plan.mode == "graph"
        if a.debug_skip_grad_sync and not (self.graph_mode and a.graph_reducer == "flat"):
            raise TrainError("--debug-skip-grad-sync applies to graph mode's flat reducer only", EXIT_USAGE)
        # graph mode's own reducers (eager runs use DDP; --debug-reducer-in-eager: them too, for the CPU tests)
        self.own_reducer = a.graph_reducer in ("flat", "bucketed") and (self.graph_mode or a.debug_reducer_in_eager)
        if a.debug_reducer_in_eager and a.graph_reducer == "ddp":
            raise TrainError("--debug-reducer-in-eager takes --graph-reducer flat or bucketed", EXIT_USAGE)
        if a.debug_per_step_buffer_broadcast and not self.own_reducer:
            raise TrainError("--debug-per-step-buffer-broadcast applies to graph mode's flat or bucketed reducer "
                             "only (or with --debug-reducer-in-eager)", EXIT_USAGE)
        if self.graph_mode and self.warmup_steps <= self.step_plan.warmup_iters \
                and self.step_plan.warmup_iters + 1 < self.stop_at:
            # the timed window starts after the eager warm-up iterations and the capture
            self.warmup_steps = self.step_plan.warmup_iters + 1

        num_classes = int(d.num_classes)
        core = build_model(a.model, shape, num_classes)
        if a.sync_bn and self.distributed and self.world > 1:
            core = convert_sync_bn(core, self.device.type)
        core = core.to(self.device)
        if self.channels_last:
            core = core.to(memory_format=torch.channels_last)
        self.core = core
        self.n_params = sum(p.numel() for p in core.parameters())

        lr = a.lr * (self.global_batch / a.lr_base_batch if a.scale_lr else 1.0)
        self.lr = lr
        if a.optimizer == "sgd":
            kw = dict(lr=lr, momentum=a.momentum, nesterov=a.momentum > 0, weight_decay=a.weight_decay)
            if self.cuda:
                kw["fused"] = True
            self.opt = torch.optim.SGD(core.parameters(), **kw)
        else:
            # capturable: its step counter and bias corrections stay on the device, so the step can be captured
            self.opt = torch.optim.AdamW(core.parameters(), lr=lr, weight_decay=a.weight_decay,
                                         **({"fused": True, "capturable": self.graph_mode} if self.cuda else {}))
        # The schedule advances by samples, not steps (the same thing at a fixed world size: a step is one global
        # batch), so a run resumed on fewer ranks, with smaller global batches, gets the LR of its place in the
        # data. The plan (in samples) is the first start's; a resume takes it from the checkpoint.
        self.sched_plan = {"total": self.total_steps * self.global_batch,
                           "warm": int(a.warmup_epochs * self.steps_per_epoch) * self.global_batch}
        self.samples_done = 0
        schedule = a.lr_schedule

        def factor(_step):
            done, gb = self.samples_done, self.global_batch
            warm, total = self.sched_plan["warm"], self.sched_plan["total"]
            if warm and done < warm:
                return (done + gb) / warm
            if schedule == "constant":
                return 1.0
            progress = min(1.0, (done - warm) / max(gb, total - warm))
            return 0.5 * (1 + math.cos(math.pi * progress))

        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, factor)
        self.lr_factor = factor
        self.scaler = torch.amp.GradScaler("cuda") if (self.precision == "fp16" and self.cuda) else None
        self.criterion = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)

        self.epoch, self.step_in_epoch, self.global_step = 0, 0, 0
        self.segment = None  # (start sample, start step) of an epoch re-dealt by an elastic resume
        self.resumed_from = None
        self._resume()
        self.epoch_steps = self.loader.epoch_steps(self.segment)
        if self.segment is not None:  # this epoch is shorter or longer than the others now
            left = (self.epoch_steps - self.step_in_epoch) + self.steps_per_epoch * (a.epochs - self.epoch - 1)
            self.total_steps = self.global_step + left
            self.stop_at = min(self.total_steps, a.max_steps) if a.max_steps else self.total_steps
        self.interval = a.checkpoint_interval
        self.control = preempt.StopControl(distributed=self.distributed and self.world > 1, rank=self.rank,
                                           interval_s=self.interval.seconds if a.output_dir else 0.0)

        # Graph mode: DDP is built (and the warm-up runs) on a side stream, as whole-network capture with DDP needs
        self.side_stream = torch.cuda.Stream(self.device) if self.graph_mode else None
        self.reducer = None
        if self.strategy == "ddp" and self.distributed and self.own_reducer:
            comm_dtype = torch.bfloat16 if a.grad_compression == "bf16" else torch.float32
            # BatchNorm buffers: rank 0's broadcast only before the steps whose buffers are read afterwards
            # (_sync_buffers_before_step), not in every step as DDP does; the same values for every reader
            buffer_sync = "step" if a.debug_per_step_buffer_broadcast else "deferred"
            if a.graph_reducer == "bucketed":
                self.reducer = BucketedAllReduce(core, broadcast_buffers=a.broadcast_buffers, comm_dtype=comm_dtype,
                                                 bucket_bytes=int(a.bucket_mb * (1 << 20)), buffer_sync=buffer_sync)
            else:
                self.reducer = FlatAllReduce(core, broadcast_buffers=a.broadcast_buffers, comm_dtype=comm_dtype,
                                             skip_sync=a.debug_skip_grad_sync, buffer_sync=buffer_sync)
            self.model = core
        elif self.strategy == "ddp" and self.distributed:
            with (torch.cuda.stream(self.side_stream) if self.graph_mode else contextlib.nullcontext()):
                if self.graph_mode:
                    self.side_stream.wait_stream(torch.cuda.current_stream(self.device))
                self.model = nn.parallel.DistributedDataParallel(
                    core, device_ids=[self.device.index] if self.cuda else None,
                    gradient_as_bucket_view=True, find_unused_parameters=False,
                    static_graph=a.static_graph or (self.graph_mode and not self.step_plan.compile),
                    **_buffer_sync_kwargs(a.broadcast_buffers))
            if self.graph_mode:
                torch.cuda.current_stream(self.device).wait_stream(self.side_stream)
            if a.grad_compression == "bf16":
                if not self.cuda:
                    raise TrainError("--grad-compression bf16 needs CUDA and NCCL; drop it on CPU "
                                     "(gloo all-reduces fp32 gradients)", EXIT_USAGE)
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
                self.model.register_comm_hook(None, default_hooks.bf16_compress_hook)
        elif self.strategy == "dp" and self.cuda and self.n_dp > 1:
            self.model = nn.DataParallel(core)
        else:
            self.model = core
        self.compile_units = None  # --compile-scope blocks: the names of the units compiled one by one
        if self.step_plan.compile:
            kw = dict(mode=None if a.compile_mode == "default" else a.compile_mode)
            if a.debug_compile_backend:
                kw["backend"] = a.debug_compile_backend
            if a.compile_scope == "blocks":  # in place: self.model (DDP or not) runs the compiled units
                self.compile_units = compilescope.compile_units(core, **kw)
            else:
                self.model = torch.compile(self.model, **kw)
        self.graph = None  # the captured step (graph mode, once captured)
        # the step after which every rank's buffers are those of a per-step broadcast (the reducer has just
        # broadcast all of them; a resumed run's ranks all loaded rank 0's checkpoint)
        self.buffers_as_of = self.global_step
        self._unready_said = False
        self.acc = torch.zeros(2, device=self.device)  # this epoch's training loss sum and correct count
        self.capture_s = self.warmup_iters_s = None
        self.startup_s = None

        self.metrics = MetricsFile((a.metrics_file or (os.path.join(a.output_dir, "metrics.jsonl")
                                                        if a.output_dir else None)) if self.is0 else None)
        self.gpu = GpuStats(self.device)
        self.gpu.start()
        tty = sys.stderr.isatty()
        self.bar = self.is0 and not a.quiet and (a.progress == "bar" or (a.progress == "auto" and tty))
        src = "synthetic" if not a.data_dir else self.train_split.source
        self.header = dict(
            world_size=self.world, strategy=self.strategy, backend=self.backend, launch=self.launch.mode,
            workload=a.workload, model=a.model, device=str(self.device), device_name=device_name(self.device),
            data=src, data_pipeline=self.pipeline, precision=self.precision, channels_last=self.channels_last,
            compile=self.step_plan.compile,
            compile_scope=a.compile_scope if self.step_plan.compile else None,
            compile_units=len(self.compile_units) if self.compile_units else None, step_mode=self.step_plan.mode,
            graph_reducer=(a.graph_reducer if (self.graph_mode or self.own_reducer) and self.distributed else None),
            graph_buckets=(len(self.reducer.bounds) if isinstance(self.reducer, BucketedAllReduce) else None),
            grad_compression=a.grad_compression if self.distributed and self.world > 1 else "none", sync_bn=a.sync_bn,
            per_rank_batch=self.per_rank_batch,
            global_batch=self.global_batch, lr=round(lr, 6), steps_per_epoch=self.steps_per_epoch,
            epochs=a.epochs, train_samples=self.train_split.length, params=self.n_params, threads=self.threads)
        self.header["step_mode_reason"] = self.step_plan.reason
        self.say("ddp-train: step: " + self.step_plan.describe() + " | "
                 + " ".join(f"{k}={v}" for k, v in self.header.items() if k != "step_mode_reason"))
        self.metrics.write("start", **self.header)

    def _resume(self):
        a = self.args
        if not a.resume:
            return
        path = None
        if self.is0:
            if a.resume == "auto":
                path, skipped = ckpt_mod.newest_valid(a.output_dir)
                for p, why in skipped:
                    self.warn(f"skipping checkpoint {p}: {why}")
            else:
                path = a.resume
        state = None
        if self.is0 and path:
            state = ckpt_mod.load(path)
            cfg = state["config"]
            for key in ("workload", "model"):
                if cfg.get(key) != getattr(a, key):
                    raise TrainError(f"checkpoint {path} is for {key} {cfg.get(key)!r}, this run is "
                                     f"{getattr(a, key)!r}; use a matching --{key} or another --output-dir",
                                     EXIT_CHECKPOINT)
        if self.distributed and self.world > 1:
            box = [(path, state)]
            dist.broadcast_object_list(box, src=0, device=self.device if self.backend == "nccl" else None)
            path, state = box[0]
        if state is None:
            if a.resume != "auto":
                raise TrainError(f"--resume {a.resume}: nothing to resume", EXIT_CHECKPOINT)
            self.say("ddp-train: no checkpoint to resume from; starting fresh")
            return
        self.core.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        self.epoch, self.step_in_epoch, self.global_step = state["epoch"], state["step_in_epoch"], state["step"]
        cfg = state["config"]
        ck_world, ck_batch = cfg.get("world_size", self.world), cfg.get("per_rank_batch", self.per_rank_batch)
        ck_global = ck_world * ck_batch
        ck_steps = data_mod.steps_per_epoch(self.train_split.length, ck_world, ck_batch)
        self.samples_done = state.get("samples_done", self.global_step * ck_global)
        self.sched_plan = state.get("schedule") or {"total": ck_steps * a.epochs * ck_global,
                                                    "warm": int(a.warmup_epochs * ck_steps) * ck_global}
        segment = tuple(state["segment"]) if state.get("segment") else None
        pos = state.get("epoch_sample")
        if pos is None:
            pos = self.step_in_epoch * ck_global
        ck_epoch_steps = state.get("epoch_steps", ck_steps)
        if self.step_in_epoch >= ck_epoch_steps:
            self.epoch, self.step_in_epoch, segment = self.epoch + 1, 0, None
        if self.step_in_epoch == 0:
            self.segment = None
        elif (ck_world, ck_batch) == (self.world, self.per_rank_batch):
            self.segment = segment  # the same deal goes on (the same as an uninterrupted run)
        else:
            # elastic: deal the rest of this epoch's permutation out to the new ranks (docs/ddp-train.md)
            self.segment = (min(pos, self.train_split.length), self.step_in_epoch)
            self.say(f"ddp-train: elastic resume: {ck_world} x {ck_batch} -> {self.world} x {self.per_rank_batch} "
                     f"(ranks x per-rank batch); the rest of epoch {self.epoch + 1} is dealt out from sample {pos} "
                     f"of {self.train_split.length}, so no sample is seen twice in it")
        rng = state.get("rng") or []
        if ck_world != self.world or ck_batch != self.per_rank_batch:
            self.warn(f"resuming a checkpoint of {ck_world} ranks x batch {ck_batch} with {self.world} x "
                      f"{self.per_rank_batch}: the global batch is now {self.global_batch}"
                      + (f" and --scale-lr sets the base LR to {self.lr:.6g}" if a.scale_lr else
                         " with the same LR (--scale-lr would scale it)")
                      + "; not bit-identical to an uninterrupted run")
            if a.scale_lr:  # the linear scaling rule for the batch in use now
                self.sched.base_lrs = [self.lr for _ in self.opt.param_groups]
                for g in self.opt.param_groups:
                    g["initial_lr"] = self.lr
                    g["lr"] = self.lr * self.lr_factor(None)
        if self.rank < len(rng):
            r = rng[self.rank]
            torch.set_rng_state(r["torch"])
            if self.cuda and r.get("cuda") is not None:
                torch.cuda.set_rng_state(r["cuda"], self.device)
            random.setstate(_to_tuple(r["python"]))
        self.resumed_from = path
        self.say(f"ddp-train: resumed from {path} at epoch {self.epoch} step {self.global_step}")

    # ------------------------------------------------------------------------------------- pieces
    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # no cast cache in graph mode (PyTorch's CUDA-graph notes: cached casts would be captured as stale tensors)
        return torch.autocast(self.device.type, dtype=self.amp_dtype, cache_enabled=not self.graph_mode)

    def save_checkpoint(self, tag):
        a = self.args
        if not a.output_dir:
            return None
        my_rng = {"torch": torch.get_rng_state(),
                  "cuda": torch.cuda.get_rng_state(self.device) if self.cuda else None,
                  "python": random.getstate()}
        rngs = [my_rng]
        if self.distributed and self.world > 1:
            rngs = [None] * self.world
            dist.all_gather_object(rngs, my_rng)
        path = None
        if self.is0:
            seg = self.segment if self.step_in_epoch else None
            pos = (seg[0] + (self.step_in_epoch - seg[1]) * self.global_batch) if seg else \
                self.step_in_epoch * self.global_batch
            payload = {
                "model": self.core.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "epoch": self.epoch, "step": self.global_step,
                "step_in_epoch": self.step_in_epoch, "rng": rngs,
                # elastic resume: where this epoch's permutation stands, and how it was dealt
                "epoch_sample": pos, "segment": list(seg) if seg else None,
                "epoch_steps": self.epoch_steps if self.step_in_epoch else self.steps_per_epoch,
                "samples_done": self.samples_done, "schedule": dict(self.sched_plan),
                "config": {"workload": a.workload, "model": a.model, "seed": a.seed, "world_size": self.world,
                           "per_rank_batch": self.per_rank_batch, "epochs": a.epochs, "strategy": self.strategy},
            }
            t0 = time.perf_counter()
            path = ckpt_mod.save(a.output_dir, payload, keep=a.keep_checkpoints)
            self.metrics.write("checkpoint", path=path, step=self.global_step, epoch=self.epoch, reason=tag,
                               seconds=round(time.perf_counter() - t0, 3))
        self.control.saved()
        return path

    @torch.no_grad()
    def evaluate(self):
        self._buffers_for_reading()
        self.core.eval()
        ev = self.eval_norm
        correct = torch.zeros((), dtype=torch.float64, device=self.device)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        count = torch.zeros((), dtype=torch.float64, device=self.device)
        idx = torch.arange(self.rank, self.test_split.length, self.world, device=self.device) % self.test_split.pool
        bs = max(256, self.args.batch_size)
        for s in range(0, idx.numel(), bs):
            b = idx[s:s + bs]
            x, y = ev.normalize(ev.images[b]), ev.labels[b]
            with self.autocast(), (compilescope.eval_eager() if self.compile_units else contextlib.nullcontext()):
                out = self.core(x)
            loss_sum += nn.functional.cross_entropy(out.float(), y, reduction="sum").double()
            correct += (out.argmax(1) == y).sum().double()
            count += y.numel()
        stats = torch.stack([correct, loss_sum, count])
        if self.distributed and self.world > 1:
            if self.backend == "gloo":
                stats = stats.cpu()
            dist.all_reduce(stats)
        c, ls, n = stats.tolist()
        self.core.train()
        return (c / n if n else float("nan")), (ls / n if n else float("nan"))

    def run_sync_check(self):
        self._buffers_for_reading()
        res = sync_mod.check(self.core, self.args.sync_bn)
        if self.is0:
            if res["bn_stats_drift"]:
                self.say(f"ddp-train: sync check: {len(res['bn_stats_drift'])} BatchNorm running-stat tensors differ "
                         "across ranks (expected without --sync-bn)")
            verdict = "PASS" if res["result"] == "pass" else "FAIL"
            self.say(f"ddp-train: sync check {verdict} at step {self.global_step}: {res['tensors']} tensors on "
                     f"{self.world} ranks" + (f"; mismatched: {', '.join(res['mismatched'])}" if res["mismatched"] else ""))
            if res["mismatched"]:
                print(f"ddp-train: error: sync check failed: {len(res['mismatched'])} tensor(s) differ across ranks: "
                      f"{', '.join(res['mismatched'][:10])}", file=sys.stderr, flush=True)
            self.metrics.write("sync_check", step=self.global_step, **res)
        return res

    # ------------------------------------------------------------------------------------- the step
    def _step_body(self, x, y):
        """Everything one training step does on the device: forward, loss, backward (DDP all-reduces the gradients
        in its hooks), optimizer step, and the epoch's loss/accuracy sums. In graph mode the captured graph holds
        exactly this, so no host-side work (logging, .item()) is in it."""
        r = self.reducer
        if r is None:
            self.opt.zero_grad(set_to_none=True)  # Python only: backward then writes (not adds) the gradients
        else:
            r.zero_grad()  # as above; all_reduce() moves the gradients into its flat buffer
            r.pre_forward()
        with self.autocast():
            out = self.model(x)
            loss = self.criterion(out, y)
        if self.scaler:
            self.scaler.scale(loss).backward()
            if r is not None:
                r.all_reduce()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            if r is not None:
                r.all_reduce()
            self.opt.step()
        with torch.no_grad():
            self.acc.add_(torch.stack([loss.detach().float() * y.shape[0], (out.detach().argmax(1) == y).sum().float()]))

    def _warmup_step(self, x, y):
        """An ordinary training step, run eagerly on the side stream before the capture (graph mode)."""
        cur = torch.cuda.current_stream(self.device)
        self.side_stream.wait_stream(cur)
        with torch.cuda.stream(self.side_stream):
            self._step_body(x, y)
        cur.wait_stream(self.side_stream)

    def _capture(self, x, y):
        """Capture one step into a CUDA graph, reading its batch from static buffers and its learning rate from
        device tensors (the scheduler's value is copied in before each replay). Capturing runs nothing: the
        caller replays the graph for this step."""
        t0 = time.perf_counter()
        self.sync_device()
        self.static_x, self.static_y = x.clone(), y.clone()
        groups = self.opt.param_groups
        self.lr_tensors = [torch.tensor(float(g["lr"]), dtype=torch.float32, device=self.device) for g in groups]
        self.lr_loaded = [float(g["lr"]) for g in groups]
        floats = [g["lr"] for g in groups]
        graph = torch.cuda.CUDAGraph()
        try:
            for g, t in zip(groups, self.lr_tensors, strict=True):
                g["lr"] = t
            # thread_local: calls other threads make meanwhile (the NCCL watchdog querying the events of earlier
            # eager collectives, the NVML sampler) cannot invalidate the capture; the watchdog does not track
            # captured collectives.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._step_body(self.static_x, self.static_y)
        finally:
            for g, v in zip(groups, floats, strict=True):
                g["lr"] = v
        self.graph = graph
        self.capture_s = time.perf_counter() - t0

    def _replay(self, x, y):
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        for i, (g, t) in enumerate(zip(self.opt.param_groups, self.lr_tensors, strict=True)):
            v = float(g["lr"])
            if v != self.lr_loaded[i]:  # a one-element fill, only when the schedule moved
                t.fill_(v)
                self.lr_loaded[i] = v
        self.graph.replay()

    def _check_unready(self):
        """Once: say which parameters got no gradient (the bucketed reducer all-reduces their zeros after the
        backward, as DDP with find_unused_parameters=True; their bucket cannot overlap the backward)."""
        names = getattr(self.reducer, "unready", None)
        if names and not self._unready_said:
            self._unready_said = True
            self.warn(f"{len(names)} parameter(s) got no gradient in step {self.global_step + 1} "
                      f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): they are averaged as zeros after "
                      "the backward, and their bucket does not overlap it")

    def step(self, x, y, warm_left):
        """One training step in this run's mode; returns the eager warm-up iterations still to go."""
        if not self.graph_mode:
            self._step_body(x, y)
            self._check_unready()
            return 0
        if self.graph is not None:
            self._replay(x, y)
            return 0
        if warm_left > 0:
            self._warmup_step(x, y)
            self._check_unready()
            if warm_left == 1:
                self.sync_device()
                self.warmup_iters_s = time.perf_counter() - self._warm_t0
            return warm_left - 1
        self._capture(x, y)
        self._replay(x, y)
        self.startup_s = time.monotonic() - self.t0
        return 0

    # ------------------------------------------------------------------------------------- loop
    def train(self):
        """Epochs of steps from where the run stands to its last step, then the end-of-run evaluation and sync
        check; writes the summary line (rank 0) and returns the exit code. A stop request leaves by Preempted."""
        a = self.args
        timer = StepTimer(self.warmup_steps, sync=self.sync_device, gpu=self.gpu)
        outcome = Outcome()
        self.saved_at = -1  # the step of this run's last checkpoint
        self.warm_left = self.step_plan.warmup_iters if self.graph_mode else 0  # graph mode's eager iterations
        self._warm_t0 = time.perf_counter()
        log = _IntervalLog(self.device)
        self.records = ProgressRecords(self)  # progress records (and --tensorboard) at each log interval
        self.prof = StepProfiler(a.profile_dir, a.profile_steps, self.rank, self.device, self.warmup_steps,
                                 self.stop_at, self.global_step)
        if self.global_step >= self.stop_at:
            self.say("ddp-train: nothing left to train (already at the last step)")
        stop = self.global_step >= self.stop_at
        self.model.train()
        self.control.install()
        self.control.saved()  # the time cadence counts from the start of training
        timer.resume(self.global_step)
        while not stop and self.epoch < a.epochs:
            epoch = self.epoch
            full_epoch = self.step_in_epoch == 0
            self.sync_device()
            t_epoch = time.perf_counter()
            self.acc.zero_()
            seen, stop = self._epoch(epoch, timer, log, outcome)
            completed = self.step_in_epoch >= self.epoch_steps
            ep_time = time.perf_counter() - t_epoch
            if seen:
                loss_sum, correct = self.acc.tolist()
                outcome.train_loss, outcome.train_acc = loss_sum / seen, correct / seen
            if completed and full_epoch:
                outcome.epoch_time = ep_time
            if outcome.sync is not None:
                break
            if completed:
                self._epoch_done(epoch, ep_time, outcome)
            if self.saved_at != self.global_step and (completed or stop):
                self.save_checkpoint("epoch" if completed else "stop")
                self.saved_at = self.global_step
            timer.resume(self.global_step)
        timer.pause()
        if self.prof.prof is not None:  # the run ended inside the profiled steps
            self.prof.write(self.global_step)
        self.control.drain()
        self.control.uninstall()
        if outcome.test_acc is None and not a.no_eval and outcome.sync is None:
            outcome.test_acc, outcome.test_loss = self.evaluate()
        if outcome.sync is None and a.sync_check == "end" and self.distributed and self.world > 1:
            outcome.sync = self.run_sync_check()
        return self._write_summary(timer, outcome)

    def _epoch(self, epoch, timer, log, outcome):
        """This epoch's steps, from where the run stands to the epoch's end or the run's last step, with its log
        lines. Returns (samples seen, whether the run stops); a failed sync check stops it (in `outcome.sync`)."""
        a = self.args
        seen, stop = 0, False
        interval_steps, interval_data = 0, 0.0
        log.start()
        bar = Progress(self.epoch_steps, f"epoch {epoch + 1}/{a.epochs}") if self.bar else None
        it = self.loader.epoch(epoch, self.step_in_epoch, self.segment)
        while True:
            batch, dt = timer.fetch(it)
            if batch is None:
                break
            x, y = batch
            interval_data += dt
            self.prof.before(self.global_step)
            self._sync_buffers_before_step()
            self.warm_left = self.step(x, y, self.warm_left)
            self.samples_done += self.global_batch
            self.sched.step()
            self.global_step += 1
            self.step_in_epoch += 1
            seen += y.shape[0]
            interval_steps += 1
            self._debug_hooks(epoch)
            timer.step_done(self.global_step, dt)
            if self.prof.due(self.global_step):  # --profile-dir: written off the clock
                timer.pause()
                self.prof.write()
                self.say(f"ddp-train: profile of {self.prof.recorded} steps written to {a.profile_dir}")
                timer.resume(self.global_step)
            last = self.global_step >= self.stop_at or self.step_in_epoch >= self.epoch_steps
            is_log = self.step_in_epoch % self.log_interval == 0 or last
            if bar or is_log:
                log.mark(self.acc, dict(epoch=epoch, step=self.global_step, step_in_epoch=self.step_in_epoch,
                                        lr=self.sched.get_last_lr()[0], steps=interval_steps, data=interval_data,
                                        seen=seen, bar=bar, log=is_log, last=last))
                interval_steps, interval_data = 0, 0.0
                for rec in log.ready(wait=bool(bar) or last):
                    self._emit(rec)
            failed = self._between_steps(timer, last)
            if failed is not None:
                outcome.sync = failed
                stop = True
                break
            if self.global_step >= self.stop_at:
                stop = True
                break
        timer.pause()
        for rec in log.ready(wait=True):
            self._emit(rec)
        if bar:
            bar.close()
        return seen, stop

    def _between_steps(self, timer, last):
        """Every rank, every step: agree on a stop request (SIGTERM/SIGUSR1) and the time cadence, then save a
        checkpoint and check the ranks' sync where due, off the clock. Returns a failed sync check's result."""
        a = self.args
        decision = self.control.poll()
        if decision.stop:
            timer.pause()
            self._preempted(decision.stop)
        every = self.interval.steps and self.global_step % self.interval.steps == 0
        if (every or decision.save) and not last:
            timer.pause()
            self.save_checkpoint("every" if every else "interval")
            self.saved_at = self.global_step
            timer.resume(self.global_step)
        if a.sync_check_every and self.global_step % a.sync_check_every == 0 and self.distributed \
                and self.world > 1 and not last:
            timer.pause()
            res = self.run_sync_check()
            if res["result"] == "fail":
                return res
            timer.resume(self.global_step)
        return None

    def _sync_buffers_before_step(self):
        """Graph mode's reducers (deferred buffer broadcast): before the forward of a step after which the ranks'
        buffers may be read (evaluation at an epoch's end or the run's, a sync check), every rank takes rank 0's,
        eagerly, outside the CUDA graph. The step then ends, on every rank, with exactly the buffers of a broadcast
        before every forward (flatreduce's docstring: why). Every rank decides alike (from the step counters)."""
        r = self.reducer
        if r is None or not r.deferred:
            return
        n, every = self.global_step + 1, self.args.sync_check_every
        if n >= self.stop_at or self.step_in_epoch + 1 >= self.epoch_steps or (every and n % every == 0):
            r.sync_buffers()
            self.buffers_as_of = n

    def _buffers_for_reading(self):
        """Before a read of the ranks' buffers (evaluation, sync check): they are a per-step broadcast's as of
        this step. A read _sync_buffers_before_step did not foresee gets rank 0's buffers broadcast now (the same
        on every rank, but on ranks other than 0 not what a per-step broadcast would have left there)."""
        r = self.reducer
        if r is not None and r.deferred and self.buffers_as_of != self.global_step:
            r.sync_buffers()
            self.buffers_as_of = self.global_step

    def _epoch_done(self, epoch, ep_time, outcome):
        """The epoch ran to its end: evaluate (unless --no-eval), then its metrics record and line."""
        a = self.args
        outcome.epochs_completed += 1
        self.epoch += 1
        self.step_in_epoch = 0
        if not a.no_eval:
            outcome.test_acc, outcome.test_loss = self.evaluate()
        o = outcome
        ev = dict(epoch=epoch, epoch_time_s=round(ep_time, 3), train_loss=o.train_loss, train_acc=o.train_acc,
                  test_acc=o.test_acc, test_loss=o.test_loss, gpu_util=self.gpu.mean_util(),
                  gpu_mem_gb=self.gpu.mem_gb())
        self.metrics.write("epoch", **ev)
        self.records.epoch_done(self.global_step, o.test_acc)
        self.segment, self.epoch_steps = None, self.steps_per_epoch
        self.say(f"epoch {epoch + 1}/{a.epochs} done in {ep_time:.2f}s: train loss {o.train_loss:.4f} "
                 f"acc {o.train_acc:.4f}" + (f", test acc {o.test_acc:.4f}" if o.test_acc is not None else ""))

    def _emit(self, rec):
        """A log line and a metrics record, written once the GPU has reached that point (no stall)."""
        a = self.args
        st = rec["seconds"] / max(1, rec["steps"])
        ips = self.global_batch / st if st > 0 else 0.0
        lval = rec["loss_sum"] / max(1, rec["seen"])
        info = dict(epoch=rec["epoch"], step=rec["step"], loss=round(lval, 4), lr=rec["lr"],
                    step_time_s=round(st, 5), data_time_s=round(rec["data"] / max(1, rec["steps"]), 5),
                    images_per_sec=round(ips, 1), gpu_util=self.gpu.mean_util())
        if rec["bar"] is not None:
            rec["bar"].update(rec["step_in_epoch"], f"loss {lval:.3f} {ips:,.0f} img/s", force=rec["last"])
        if rec["log"]:
            if rec["bar"] is None:
                self.say(f"epoch {rec['epoch'] + 1}/{a.epochs} step {rec['step_in_epoch']}/{self.epoch_steps} "
                         f"(global {rec['step']}) loss {lval:.4f} step {st * 1000:.1f} ms "
                         f"data {info['data_time_s'] * 1000:.1f} ms {ips:,.0f} img/s")
            self.metrics.write("step", **info)
            self.records.emit(info)

    def _write_summary(self, timer, outcome):
        """The summary line on rank 0's stdout (and in its metrics file); returns the run's exit code."""
        a = self.args
        summary = summary_mod.build(
            self.header, timer, outcome, steps=self.global_step, gpu_util=self.gpu.mean_util(),
            gpu_mem_gb=self.gpu.mem_gb(), startup_s=self.startup_s, warmup_iters_s=self.warmup_iters_s,
            capture_s=self.capture_s,
            checkpoint=(ckpt_mod.list_checkpoints(a.output_dir) or [None])[-1] if a.output_dir else None,
            resumed_from=self.resumed_from, wall_time_s=round(time.monotonic() - self.t0, 3))
        if self.is0:
            self.metrics.write("summary", **{k: v for k, v in summary.items() if k != "event"})
            self.metrics.close()
            sys.stdout.write(json.dumps(summary) + "\n")
            sys.stdout.flush()
        return summary["exit_code"]

    def _preempted(self, signame):
        """All ranks agreed to stop at this step: save here (once) and leave with the retryable code."""
        path = None
        if self.args.output_dir:
            path = self.save_checkpoint("preempt") if self.saved_at != self.global_step else \
                ckpt_mod.list_checkpoints(self.args.output_dir)[-1] if self.is0 else None
        if self.is0:
            self.metrics.write("preempted", signal=signame, step=self.global_step, checkpoint=path)
            self.metrics.close()
        # Nobody leaves before rank 0's checkpoint is on disk: a launcher that sees one rank exit may kill the
        # others at once (srun --kill-on-bad-exit, a pod's other containers), rank 0 in the middle of its save.
        self.control.barrier()
        where = (f"checkpoint {path} saved" if path else "checkpoint saved by rank 0") if self.args.output_dir \
            else "no checkpoint (no --output-dir)"
        self.control.uninstall()
        raise Preempted(f"{signame} at step {self.global_step} (epoch {self.epoch + 1}); {where}; retryable "
                        f"(exit {EXIT_PREEMPTED}): run again with --resume auto to continue from step "
                        f"{self.global_step}")

    def _debug_hooks(self, epoch=0):
        a = self.args
        if a.debug_sample_log and getattr(self.loader, "last_indices", None) is not None:
            os.makedirs(a.debug_sample_log, exist_ok=True)
            with open(os.path.join(a.debug_sample_log, f"samples-rank{self.rank}.txt"), "a") as f:
                f.write(f"{epoch} {self.step_in_epoch} {self.world} "
                        + ",".join(map(str, self.loader.last_indices.tolist())) + "\n")
        if a.debug_step_sleep:
            time.sleep(a.debug_step_sleep)
        if a.debug_perturb_rank is not None and self.rank == a.debug_perturb_rank and self.global_step == 1:
            with torch.no_grad():
                next(self.core.parameters()).add_(1e-3)
        if a.debug_exit_rank is not None and self.rank == a.debug_exit_rank and self.global_step == a.debug_exit_step:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(17)  # simulate a crashed peer

    def close(self):
        if self.distributed and dist.is_initialized():
            # Everyone is done before anyone tears down: a rank that leaves while a peer still talks to it
            # makes gloo abort ("terminate called without an active exception").
            dist.barrier()
            if self.graph is not None:
                # A CUDA graph that holds NCCL kernels keeps the communicator busy: destroy_process_group then
                # waits forever (seen on 2x/4x H200, torch 2.11, NCCL 2.28). The process leaves with os._exit
                # right after this (ddp_train.__main__), which frees both.
                self.sync_device()
                return
            dist.destroy_process_group()


class _IntervalLog:
    """Figures for the log lines without stalling the step. On a GPU a log point copies the loss sum to pinned
    host memory (non-blocking) and records a CUDA event; its line is written once that event has completed (at
    a later log point, or at the end of the epoch), with the interval's time measured between events on the
    GPU. So no log point waits for the device. On CPU: the host clock, written at once."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.pending = []
        self.prev = None

    def _now(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self):
        self.pending.clear()
        self.prev = self._now()

    def mark(self, acc, rec):
        if self.cuda:
            host = torch.empty(acc.shape, dtype=acc.dtype, pin_memory=True)
            host.copy_(acc, non_blocking=True)
        else:
            host = acc.detach().clone()
        now = self._now()
        self.pending.append((self.prev, now, host, rec))
        self.prev = now

    def ready(self, wait=False):
        out = []
        while self.pending:
            a, b, host, rec = self.pending[0]
            if self.cuda:
                if not wait and not b.query():
                    break
                b.synchronize()
                seconds = a.elapsed_time(b) / 1000.0
            else:
                seconds = b - a
            self.pending.pop(0)
            out.append(dict(rec, seconds=seconds, loss_sum=float(host[0])))
        return out


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def run(args) -> int:
    r = Run(args)
    r.setup()
    code = r.train()
    r.close()
    return code


def _buffer_sync_kwargs(sync: bool) -> dict:
    """DDP's per-forward buffer broadcast switch: `broadcast_buffers` (renamed `forward_sync_buffers` in newer
    torch, which still syncs once at construction, as we want)."""
    if sync:
        return {}
    import inspect

    params = inspect.signature(nn.parallel.DistributedDataParallel.__init__).parameters
    return {"forward_sync_buffers": False} if "forward_sync_buffers" in params else {"broadcast_buffers": False}
