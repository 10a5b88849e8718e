"""The run's parts on the device: the model (DDP, DataParallel or graph mode's own reducer around it, compiled
as planned), the optimizer, the LR schedule, the loss and the fp16 scaler."""

from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import dataclass

import torch
from torch import nn

from ddp_train.comm import compression
from ddp_train.comm.bucket_reduce import BucketedAllReduce
from ddp_train.comm.flat_reduce import FlatAllReduce
from ddp_train.config import settings as config
from ddp_train.config import step_plan
from ddp_train.loop.lr_schedule import Schedule
from ddp_train.model import compile_scope
from ddp_train.model.networks import build_model, convert_sync_bn


class Parts:
    """What build() made: ``core`` (the bare model, what checkpoints hold), ``model`` (what the step calls),
    ``reducer`` (graph mode's own, or None), ``optimizer``, ``schedule``, ``criterion``, ``scaler``, ..."""


@dataclass(frozen=True)
class Numerics:
    precision: str  # fp32 | bf16 | fp16
    amp_dtype: torch.dtype | None  # autocast's dtype (None: fp32)
    channels_last: bool
    n_dp: int  # GPUs DataParallel drives in this process (1 otherwise)


def numerics(args, rt) -> Numerics:
    precision = args.precision if args.precision != "auto" else ("bf16" if rt.cuda else "fp32")
    return Numerics(precision, {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision),
                    args.channels_last if args.channels_last is not None else rt.cuda,
                    torch.cuda.device_count() if (rt.strategy == "dp" and rt.cuda) else 1)


def build(args, rt, *, plan, shape, num_classes, global_batch, steps_per_epoch, total_steps, num) -> Parts:
    p = Parts()
    amp_dtype, channels_last = num.amp_dtype, num.channels_last
    p.amp_dtype = amp_dtype
    graph_mode = plan.mode == "graph"
    core = build_model(args.model, shape, num_classes)
    if args.sync_bn and rt.multi:
        core = convert_sync_bn(core, rt.device.type)
    core = core.to(rt.device)
    if channels_last:
        core = core.to(memory_format=torch.channels_last)
    p.core = core
    p.n_params = sum(t.numel() for t in core.parameters())
    p.lr = args.lr * (global_batch / args.lr_base_batch if args.scale_lr else 1.0)
    p.optimizer = _optimizer(args, core, p.lr, cuda=rt.cuda, graph_mode=graph_mode)
    # The plan (in samples) is the first start's; a resume takes it from the checkpoint.
    p.schedule = Schedule(p.optimizer, kind=args.lr_schedule, global_batch=global_batch,
                          total=total_steps * global_batch,
                          warm=int(args.warmup_epochs * steps_per_epoch) * global_batch)
    p.scaler = torch.amp.GradScaler("cuda") if (amp_dtype == torch.float16 and rt.cuda) else None
    p.criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    return p


def _optimizer(args, core, lr, *, cuda, graph_mode):
    if args.optimizer == "sgd":
        kw = dict(lr=lr, momentum=args.momentum, nesterov=args.momentum > 0, weight_decay=args.weight_decay)
        if cuda:
            kw["fused"] = True
        return torch.optim.SGD(core.parameters(), **kw)
    # capturable: its step counter and bias corrections stay on the device, so the step can be captured
    return torch.optim.AdamW(core.parameters(), lr=lr, weight_decay=args.weight_decay,
                             **({"fused": True, "capturable": graph_mode} if cuda else {}))


def wrap(args, rt, p: Parts, *, plan, n_dp, comm) -> None:
    """Put the data-parallel wrapper (or graph mode's own reducer) around the model, then compile as planned.
    Graph mode: DDP is built (and the warm-up runs) on a side stream, as whole-network capture with DDP needs."""
    graph_mode = plan.mode == "graph"
    core = p.core
    p.side_stream = torch.cuda.Stream(rt.device) if graph_mode else None
    p.reducer = None
    own = config.uses_own_reducer(args, graph_mode)
    if rt.distributed and own:
        comm_dtype = compression.comm_dtype(comm)
        # BatchNorm buffers: rank 0's broadcast only before the steps whose buffers are read afterwards
        # (Trainer.sync_buffers_before_step), not in every step as DDP does; the same values for every reader
        buffer_sync = "step" if args.debug_per_step_buffer_broadcast else "deferred"
        if args.graph_reducer == "bucketed":
            p.reducer = BucketedAllReduce(core, broadcast_buffers=args.broadcast_buffers, comm_dtype=comm_dtype,
                                          bucket_bytes=int(args.bucket_mb * (1 << 20)), buffer_sync=buffer_sync)
        else:
            p.reducer = FlatAllReduce(core, broadcast_buffers=args.broadcast_buffers, comm_dtype=comm_dtype,
                                      skip_sync=args.debug_skip_grad_sync, buffer_sync=buffer_sync)
        p.model = core
    elif rt.distributed:
        with (torch.cuda.stream(p.side_stream) if graph_mode else contextlib.nullcontext()):
            if graph_mode:
                p.side_stream.wait_stream(torch.cuda.current_stream(rt.device))
            p.model = nn.parallel.DistributedDataParallel(
                core, device_ids=[rt.device.index] if rt.cuda else None,
                gradient_as_bucket_view=True, find_unused_parameters=False, bucket_cap_mb=args.bucket_mb,
                static_graph=args.static_graph or (graph_mode and not plan.compile),
                **buffer_sync_kwargs(args.broadcast_buffers))
        if graph_mode:
            torch.cuda.current_stream(rt.device).wait_stream(p.side_stream)
        compression.register_hook(p.model, comm)
    elif rt.strategy == "dp" and rt.cuda and n_dp > 1:
        p.model = nn.DataParallel(core)
    else:
        p.model = core
    p.buckets = len(p.reducer.bounds) if isinstance(p.reducer, BucketedAllReduce) else None
    p.compile_units = None  # --compile-scope blocks: the names of the units compiled one by one
    if plan.compile:
        kw = dict(mode=None if args.compile_mode == "default" else args.compile_mode)
        if args.debug_compile_backend:
            kw["backend"] = args.debug_compile_backend
        if args.compile_scope == "blocks":  # in place: the model (DDP or not) runs the compiled units
            p.compile_units = compile_scope.compile_units(core, **kw)
        else:
            p.model = torch.compile(p.model, **kw)


def buffer_sync_kwargs(sync: bool) -> dict:
    """DDP's per-forward buffer broadcast switch: `broadcast_buffers` (renamed `forward_sync_buffers` in newer
    torch, which still syncs once at construction, as we want)."""
    if sync:
        return {}
    params = inspect.signature(nn.parallel.DistributedDataParallel.__init__).parameters
    return {"forward_sync_buffers": False} if "forward_sync_buffers" in params else {"broadcast_buffers": False}


def plan_step(args, rt, *, precision, planned_steps):
    """The run's step mode and compile decision (step_plan.plan_step, its flag rules in config) for this process."""
    return config.plan_step(
        requested=args.step_mode, device_type=rt.device.type, strategy=rt.strategy, precision=precision,
        compile=args.compile, compile_mode=args.compile_mode, sync_bn=args.sync_bn,
        grad_compression=args.grad_compression, planned_steps=planned_steps, distributed=rt.distributed,
        graph_reducer=args.graph_reducer, compile_if_repaid=args.compile_if_repaid,
        compile_blocker=None if args.debug_compile_backend not in (None, "inductor")  # no C++ build then
        else step_plan.compile_blocker(os.path.dirname(torch.__file__)))
