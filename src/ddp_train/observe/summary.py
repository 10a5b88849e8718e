"""The summary line: the JSON object ddp-train prints last on rank 0's stdout, described by summary.schema.json
(the contract with its readers, `ddpctl bench` among them: keys may be added, never renamed)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from ddp_train.errors import EXIT_OK, EXIT_SYNC


@dataclass
class Outcome:
    """What the training loop found, filled in as it goes."""

    epochs_completed: int = 0
    epoch_time: float | None = None  # seconds of the last epoch run from its first step to its last
    train_loss: float | None = None  # the last epoch's training loss and accuracy (over its steps so far)
    train_acc: float | None = None
    test_acc: float | None = None  # the last evaluation
    test_loss: float | None = None
    sync: dict | None = None  # the sync check that failed during training, or the one at the end


def build(header, timer, outcome, *, steps, gpu_util, gpu_mem_gb, startup_s, pre_capture_s, capture_s,
          checkpoint, resumed_from, wall_time_s) -> dict:
    """The summary: the run's header, then its figures. Throughput comes from the timed steps only
    (`StepTimer`); without a full epoch, the epoch time is estimated from the step time (and says so)."""
    world, global_batch = header["world_size"], header["global_batch"]
    img_s = timer.images_per_sec(global_batch)
    step_t = timer.step_time()
    est = outcome.epoch_time is None and step_t is not None
    epoch_t = outcome.epoch_time if outcome.epoch_time is not None else \
        (step_t * header["steps_per_epoch"] if est else None)
    sync = outcome.sync
    summary = dict(
        event="summary", **header,
        epochs_completed=outcome.epochs_completed, steps=steps, timed_steps=timer.steps,
        warmup_steps=timer.untimed_steps,  # the published key names (summary.schema.json) stay
        images_per_sec=_r(img_s, 1), images_per_sec_per_rank=_r(img_s / world if img_s else None, 1),
        step_time_s=_r(step_t, 6), data_time_s=_r(timer.data_time(), 6),
        epoch_time_s=_r(epoch_t, 3),
        epoch_time_estimated=est, final_accuracy=_r(outcome.test_acc, 4), final_loss=_r(outcome.test_loss, 4),
        train_loss=_r(outcome.train_loss, 4), train_accuracy=_r(outcome.train_acc, 4),
        sync_check=sync["result"] if sync else "skipped",
        sync_mismatched=sync["mismatched"] if sync else [],
        bn_stats_drift=len(sync["bn_stats_drift"]) if sync else 0,
        gpu_util=gpu_util, gpu_mem_gb=gpu_mem_gb,
        startup_s=_r(startup_s, 3), warmup_iters_s=_r(pre_capture_s, 3), capture_s=_r(capture_s, 3),
        checkpoint=checkpoint, resumed_from=resumed_from, wall_time_s=wall_time_s)
    summary["exit_code"] = EXIT_SYNC if summary["sync_check"] == "fail" else EXIT_OK
    return summary


def _r(v, nd):
    return None if v is None else round(float(v), nd)


def header(config, rt, *, device_name, inputs, parts, num, plan, per_rank_batch, steps_per_epoch) -> dict:
    """What the run is (``config``: its RunConfig, ``plan``: its RunPlan): the first metrics record, the first log
    line and the head of the summary."""
    step, comm = plan.step, plan.comm
    train = inputs.train_split
    return dict(
        world_size=rt.world, strategy=rt.strategy, backend=rt.backend, launch=rt.launch.mode,
        workload=config.workload, model=config.model, device=str(rt.device), device_name=device_name,
        data="synthetic" if not config.data_dir else train.source, data_pipeline=inputs.pipeline,
        precision=num.precision, channels_last=num.channels_last,
        compile=step.compile, compile_scope=config.compile_scope if step.compile else None,
        compile_units=len(parts.compile_units) if parts.compile_units else None, step_mode=step.mode,
        graph_reducer=(comm.graph_reducer if (plan.graph_mode or plan.own_reducer) and rt.distributed else None),
        graph_buckets=parts.buckets,
        grad_compression=comm.compression if rt.multi else "none", sync_bn=config.sync_bn,
        per_rank_batch=per_rank_batch, global_batch=per_rank_batch * rt.world, lr=round(parts.lr, 6),
        steps_per_epoch=steps_per_epoch, epochs=config.epochs, train_samples=train.length, params=parts.n_params,
        threads=rt.threads, step_mode_reason=step.reason)


def write(summary: dict, metrics) -> None:
    """Rank 0: the summary as the metrics file's last record and as the last line on stdout."""
    metrics.write("summary", **{k: v for k, v in summary.items() if k != "event"})
    metrics.close()
    sys.stdout.write(json.dumps(summary) + "\n")
    sys.stdout.flush()
