"""``RunConfig``: the run's configuration as the parts receive it: every flag of ``ddp-train``, typed, with the
workload's defaults filled in and the checkpoint cadence resolved; frozen. Built once from the parsed flags by
``settings.parse_args`` (the argparse result never leaves this package). The decisions made from it and the
launch (strategy, gradient compression, step plan, timed window) are in ``run_plan``.

Three different "warm-ups" have three names here and in the code that reads them:
``lr_warmup_epochs`` (``--warmup-epochs``: the LR schedule's linear ramp), ``untimed_steps`` (``--warmup-steps``:
the first steps left out of the throughput figures) and, in ``step_plan``, ``pre_capture_iters`` (graph mode's
eager iterations before the CUDA-graph capture)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from ddp_train.config.checkpoint_interval import CheckpointInterval

# The flags whose field has another name than the flag's own (the flags stay as users know them).
FIELD_OF_FLAG = {"warmup_epochs": "lr_warmup_epochs", "warmup_steps": "untimed_steps"}
# Flags folded into another field by settings.parse_args (--checkpoint-every into checkpoint_interval).
FOLDED_FLAGS = ("checkpoint_every",)


@dataclass(frozen=True)
class RunConfig:
    # launch
    strategy: str  # ddp | dp | single (as asked: run_plan.strategy_for decides what the launch runs)
    backend: str  # auto | nccl | gloo
    device: str  # auto | cpu | cuda
    init_method: str | None
    rank: int | None
    world_size: int | None
    local_rank: int | None
    connect_timeout: float
    pg_timeout: float
    # workload and data
    workload: str
    model: str
    data_dir: str | None
    train_size: int
    test_size: int
    synthetic_pool: int
    data_pipeline: str  # auto | device | dataloader | classic
    workers: int | None
    no_augment: bool
    # optimisation
    epochs: int
    batch_size: int  # per rank
    lr: float
    scale_lr: bool
    lr_base_batch: int
    lr_schedule: str  # cosine | constant
    lr_warmup_epochs: float  # --warmup-epochs: the LR's linear ramp, in epochs
    optimizer: str  # sgd | adamw
    momentum: float
    weight_decay: float
    label_smoothing: float
    precision: str  # auto | fp32 | bf16 | fp16
    channels_last: bool | None  # None: on GPU
    compile: bool | None  # None: the auto rule (compile_if_repaid)
    compile_if_repaid: bool
    compile_mode: str
    compile_scope: str  # model | blocks
    step_mode: str  # auto | eager | graph (as asked: run_plan decides)
    graph_reducer: str  # auto | flat | bucketed | ddp (as asked: compression.decide resolves auto)
    bucket_mb: float | None  # None: auto
    cudnn_benchmark: bool | None
    broadcast_buffers: bool
    grad_compression: str  # auto | none | bf16 | powersgd (as asked: compression.decide resolves auto)
    static_graph: bool
    sync_bn: bool
    seed: int
    deterministic: bool
    max_steps: int | None
    untimed_steps: int | None  # --warmup-steps: steps left out of the throughput figures (None: run_plan's default)
    no_eval: bool
    # checkpoints
    output_dir: str | None
    checkpoint_interval: CheckpointInterval  # --checkpoint-interval and --checkpoint-every together
    keep_checkpoints: int
    resume: str | None
    # metrics and checks
    log_interval: int | None
    metrics_file: str | None
    progress: str  # auto | bar | lines
    progress_records: str  # on | off
    tensorboard: str | None
    sync_check: str  # end | off
    sync_check_every: int
    quiet: bool
    profile_dir: str | None
    profile_steps: int
    # test and diagnosis hooks (hidden flags)
    debug_perturb_rank: int | None
    debug_exit_rank: int | None
    debug_exit_step: int
    debug_sample_log: str | None
    debug_step_sleep: float
    debug_skip_grad_sync: bool
    debug_reducer_in_eager: bool
    debug_compile_backend: str | None
    debug_per_step_buffer_broadcast: bool


def from_namespace(ns: argparse.Namespace) -> RunConfig:
    """The frozen config of a parsed, completed flag namespace (``settings.parse_args`` fills it in first)."""
    values = {FIELD_OF_FLAG.get(k, k): v for k, v in vars(ns).items() if k not in FOLDED_FLAGS}
    names = {f.name for f in fields(RunConfig)}
    if set(values) != names:  # a flag without a field, or a field without a flag: a programming error
        raise AssertionError(f"flags and RunConfig differ: {sorted(set(values) ^ names)}")
    return RunConfig(**values)
