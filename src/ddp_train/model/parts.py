"""The run's parts on the device: the model (DDP, DataParallel or graph mode's own reducer around it, compiled
as planned), the optimizer, the LR schedule, the loss and the fp16 scaler."""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch
from torch import nn

from ddp_train.comm import compression
from ddp_train.comm.bucket_reduce import BucketedAllReduce
from ddp_train.comm.flat_reduce import FlatAllReduce
from ddp_train.config.run_config import RunConfig
from ddp_train.config.run_plan import RunPlan
from ddp_train.model import compile_scope
from ddp_train.model.lr_schedule import Schedule
from ddp_train.model.networks import build_model, convert_sync_bn


@dataclass
class Parts:
    """The run's parts on the device. ``build`` makes the model and what trains it; ``wrap`` then puts the
    data-parallel wrapper around it (``model``, ``reducer``, ``side_stream``, ``buckets``, ``compile_units``)."""

    core: nn.Module  # the bare model: what checkpoints hold
    n_params: int
    lr: float  # the base LR (after --scale-lr)
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    criterion: nn.Module
    scaler: torch.amp.GradScaler | None  # fp16 on GPU only
    amp_dtype: torch.dtype | None  # autocast's dtype (None: fp32)
    model: nn.Module | None = None  # what the step calls: DDP, DataParallel or the core, compiled as planned
    reducer: FlatAllReduce | BucketedAllReduce | None = None  # graph mode's own reducer (None: DDP or none)
    side_stream: torch.cuda.Stream | None = None  # graph mode: where DDP is built and the pre-capture steps run
    buckets: int | None = None  # --graph-reducer bucketed: its bucket count
    compile_units: list[str] | None = None  # --compile-scope blocks: the units compiled one by one


@dataclass(frozen=True)
class Numerics:
    precision: str  # fp32 | bf16 | fp16
    amp_dtype: torch.dtype | None  # autocast's dtype (None: fp32)
    channels_last: bool
    n_dp: int  # GPUs DataParallel drives in this process (1 otherwise)


def numerics(config: RunConfig, rt) -> Numerics:
    precision = config.precision if config.precision != "auto" else ("bf16" if rt.cuda else "fp32")
    return Numerics(precision, {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision),
                    config.channels_last if config.channels_last is not None else rt.cuda,
                    torch.cuda.device_count() if (rt.strategy == "dp" and rt.cuda) else 1)


def build(config: RunConfig, rt, *, graph_mode: bool, shape, num_classes, global_batch, steps_per_epoch,
          total_steps, num: Numerics) -> Parts:
    core = build_model(config.model, shape, num_classes)
    if config.sync_bn and rt.multi:
        core = convert_sync_bn(core, rt.device.type)
    core = core.to(rt.device)
    if num.channels_last:
        core = core.to(memory_format=torch.channels_last)
    lr = config.lr * (global_batch / config.lr_base_batch if config.scale_lr else 1.0)
    optimizer = _optimizer(config, core, lr, cuda=rt.cuda, graph_mode=graph_mode)
    # The plan (in samples) is the first start's; a resume takes it from the checkpoint.
    schedule = Schedule(optimizer, kind=config.lr_schedule, global_batch=global_batch,
                        total=total_steps * global_batch,
                        warm=int(config.lr_warmup_epochs * steps_per_epoch) * global_batch)
    return Parts(core=core, n_params=sum(t.numel() for t in core.parameters()), lr=lr, optimizer=optimizer,
                 schedule=schedule, criterion=nn.CrossEntropyLoss(label_smoothing=config.label_smoothing),
                 scaler=torch.amp.GradScaler("cuda") if (num.amp_dtype == torch.float16 and rt.cuda) else None,
                 amp_dtype=num.amp_dtype)


def _optimizer(config: RunConfig, core, lr, *, cuda, graph_mode):
    if config.optimizer == "sgd":
        kw = dict(lr=lr, momentum=config.momentum, nesterov=config.momentum > 0, weight_decay=config.weight_decay)
        if cuda:
            kw["fused"] = True
        return torch.optim.SGD(core.parameters(), **kw)
    # capturable: its step counter and bias corrections stay on the device, so the step can be captured
    return torch.optim.AdamW(core.parameters(), lr=lr, weight_decay=config.weight_decay,
                             **({"fused": True, "capturable": graph_mode} if cuda else {}))


def wrap(config: RunConfig, rt, p: Parts, *, plan: RunPlan, n_dp) -> None:
    """Put the data-parallel wrapper (or graph mode's own reducer) around the model, then compile as planned.
    Graph mode: DDP is built (and the pre-capture steps run) on a side stream, as whole-network capture with DDP
    needs."""
    graph_mode, comm = plan.graph_mode, plan.comm
    core = p.core
    p.side_stream = torch.cuda.Stream(rt.device) if graph_mode else None
    p.reducer = None
    if rt.distributed and plan.own_reducer:
        comm_dtype = compression.comm_dtype(comm)
        # BatchNorm buffers: rank 0's broadcast only before the steps whose buffers are read afterwards
        # (Trainer.sync_buffers_before_step), not in every step as DDP does; the same values for every reader
        buffer_sync = "step" if config.debug_per_step_buffer_broadcast else "deferred"
        if comm.graph_reducer == "bucketed":
            p.reducer = BucketedAllReduce(core, broadcast_buffers=config.broadcast_buffers, comm_dtype=comm_dtype,
                                          bucket_bytes=int(comm.bucket_mb * (1 << 20)), buffer_sync=buffer_sync)
        else:
            p.reducer = FlatAllReduce(core, broadcast_buffers=config.broadcast_buffers, comm_dtype=comm_dtype,
                                      skip_sync=config.debug_skip_grad_sync, buffer_sync=buffer_sync)
        p.model = core
    elif rt.distributed:
        with (torch.cuda.stream(p.side_stream) if graph_mode else contextlib.nullcontext()):
            if graph_mode:
                p.side_stream.wait_stream(torch.cuda.current_stream(rt.device))
            p.model = nn.parallel.DistributedDataParallel(
                core, device_ids=[rt.device.index] if rt.cuda else None,
                gradient_as_bucket_view=True, find_unused_parameters=False, bucket_cap_mb=comm.bucket_mb,
                static_graph=config.static_graph or (graph_mode and not plan.step.compile),
                **buffer_sync_kwargs(config.broadcast_buffers))
        if graph_mode:
            torch.cuda.current_stream(rt.device).wait_stream(p.side_stream)
        compression.register_hook(p.model, comm)
    elif rt.strategy == "dp" and rt.cuda and n_dp > 1:
        p.model = nn.DataParallel(core)
    else:
        p.model = core
    p.buckets = len(p.reducer.bounds) if isinstance(p.reducer, BucketedAllReduce) else None
    p.compile_units = None
    if plan.step.compile:
        kw = dict(mode=None if config.compile_mode == "default" else config.compile_mode)
        if config.debug_compile_backend:
            kw["backend"] = config.debug_compile_backend
        if config.compile_scope == "blocks":  # in place: the model (DDP or not) runs the compiled units
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
