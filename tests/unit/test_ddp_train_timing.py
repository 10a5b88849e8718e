"""ddp_train's step timer (which steps are timed, paused time, data time, the throughput figures) and the summary
builder that turns its figures into the summary line, in-process with a hand-driven clock. A real run's summary is
tests/distributed/test_train_summary_schema.py; that the split changed nothing end to end is the distributed suite
(log lines, checkpoints byte for byte after a stop, exit codes)."""

from __future__ import annotations

import json
from importlib import resources
from types import SimpleNamespace

import jsonschema
import pytest

from ddp_train.errors import EXIT_OK, EXIT_SYNC
from ddp_train.loop.step_timer import StepTimer
from ddp_train.observe import summary


class Clock:
    """A clock the test moves; every reading is logged after the device syncs the timer asked for."""

    def __init__(self, events):
        self.t, self.events = 100.0, events

    def __call__(self):
        self.events.append("clock")
        return self.t


def make(warmup):
    events = []
    clock = Clock(events)
    gpu = SimpleNamespace(active=False)
    timer = StepTimer(warmup, sync=lambda: events.append("sync"), gpu=gpu, clock=clock)
    return timer, clock, gpu, events


def run_steps(timer, clock, first, last, step_s=1.0, data_s=0.25):
    """Global steps first..last, each taking step_s (data_s of it waiting for the batch)."""
    for g in range(first, last + 1):
        clock.t += step_s
        timer.step_done(g, data_s)


def test_warmup_steps_are_not_timed():
    timer, clock, gpu, _ = make(warmup=3)
    timer.resume(0)  # the start of training: still in the warm-up
    assert not timer.running and not gpu.active
    run_steps(timer, clock, 1, 3, step_s=50.0)  # slow warm-up steps: none of this may count
    assert timer.running and gpu.active  # the clock starts once step 3 (the last warm-up step) is done
    run_steps(timer, clock, 4, 7, step_s=2.0)
    timer.pause()
    assert (timer.steps, timer.seconds) == (4, 8.0)
    assert timer.step_time() == 2.0 and not gpu.active


def test_no_warmup_times_from_the_first_step():
    timer, clock, _, _ = make(warmup=0)
    timer.resume(0)
    run_steps(timer, clock, 1, 2, step_s=1.5)
    timer.pause()
    assert (timer.steps, timer.seconds) == (2, 3.0)


def test_paused_time_and_steps_are_excluded():
    timer, clock, gpu, _ = make(warmup=0)
    timer.resume(0)
    run_steps(timer, clock, 1, 2)
    timer.pause()
    clock.t += 1000.0  # a checkpoint, an evaluation: off the clock
    run_steps(timer, clock, 3, 3, step_s=7.0)  # a step while paused is not timed either
    assert not gpu.active
    timer.resume(3)
    run_steps(timer, clock, 4, 5)
    timer.pause()
    timer.pause()  # pausing twice adds nothing
    assert (timer.steps, timer.seconds) == (4, 4.0)


def test_resume_while_running_keeps_the_open_segment():
    timer, clock, _, _ = make(warmup=0)
    timer.resume(0)
    clock.t += 5.0
    timer.resume(1)  # must not restart the segment (the 5 s would be lost)
    timer.step_done(1, 0.0)
    timer.pause()
    assert timer.seconds == 5.0


def test_the_device_is_synced_before_each_clock_reading_at_both_ends():
    timer, clock, _, events = make(warmup=0)
    timer.resume(0)
    clock.t += 1.0
    timer.pause()
    assert events == ["sync", "clock", "sync", "clock"]
    timer.pause()
    timer.resume(-1)  # before the warm-up's end (a no-op): no sync either
    assert events == ["sync", "clock", "sync", "clock"]


def test_data_time_counts_only_timed_steps():
    timer, clock, _, _ = make(warmup=2)
    timer.resume(0)
    run_steps(timer, clock, 1, 2, data_s=9.0)  # warm-up: not counted
    run_steps(timer, clock, 3, 6, step_s=1.0, data_s=0.25)
    timer.pause()
    assert timer.data_seconds == 1.0 and timer.data_time() == 0.25


def test_images_per_sec_come_from_timed_steps_and_timed_seconds():
    timer, clock, _, _ = make(warmup=1)
    timer.resume(0)
    run_steps(timer, clock, 1, 1, step_s=100.0)
    run_steps(timer, clock, 2, 5, step_s=0.5)
    timer.pause()
    assert timer.images_per_sec(64) == pytest.approx(4 * 64 / 2.0)


def test_no_timed_step_gives_no_figures():
    timer, clock, _, _ = make(warmup=10)
    timer.resume(0)
    run_steps(timer, clock, 1, 4)
    timer.pause()
    assert (timer.step_time(), timer.data_time(), timer.images_per_sec(64)) == (None, None, None)


def test_fetch_times_the_wait_for_a_batch_and_ends_with_none():
    timer, clock, _, _ = make(warmup=0)

    def batches():
        clock.t += 0.75
        yield "b1"

    it = batches()
    assert timer.fetch(it) == ("b1", 0.75)
    assert timer.fetch(it) == (None, 0.0)


# ------------------------------------------------------------------------------------------ the summary
HEADER = dict(
    world_size=2, strategy="ddp", backend="gloo", launch="torchrun", workload="toy", model="toy-cnn", device="cpu",
    device_name="cpu (x86_64, 2 cores)", data="synthetic", data_pipeline="device", precision="fp32",
    channels_last=False, compile=False, step_mode="eager", graph_reducer=None, grad_compression="none",
    sync_bn=False, per_rank_batch=32, global_batch=64, lr=0.05, steps_per_epoch=10, epochs=2, train_samples=640,
    params=24346, threads=1, step_mode_reason="CUDA graphs need a GPU")
RUN = dict(steps=20, gpu_util=None, gpu_mem_gb=None, startup_s=None, warmup_iters_s=None, capture_s=None,
           checkpoint="/out/ckpt-00000020.pt", resumed_from=None, wall_time_s=12.5)


def timed(warmup, steps, step_s):
    timer, clock, _, _ = make(warmup)
    timer.resume(0)
    run_steps(timer, clock, 1, warmup, step_s=30.0)
    run_steps(timer, clock, warmup + 1, warmup + steps, step_s=step_s, data_s=step_s / 4)
    timer.pause()
    return timer


def validate(s):
    schema = json.loads((resources.files("ddp_train") / "summary.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(s)


def test_summary_figures_come_from_the_timer_and_validate():
    out = summary.Outcome(epochs_completed=2, epoch_time=3.21, train_loss=1.23456, train_acc=0.5,
                          test_acc=0.61234, test_loss=1.9, sync={"result": "pass", "mismatched": [],
                                                                 "bn_stats_drift": ["a", "b"]})
    s = summary.build(HEADER, timed(warmup=4, steps=16, step_s=0.25), out, **RUN)
    validate(s)
    assert list(s)[:1 + len(HEADER)] == ["event", *HEADER]
    assert (s["timed_steps"], s["warmup_steps"], s["steps"]) == (16, 4, 20)
    assert s["images_per_sec"] == 256.0 and s["images_per_sec_per_rank"] == 128.0  # 64 images per 0.25 s
    assert s["step_time_s"] == 0.25 and s["data_time_s"] == 0.0625
    assert s["epoch_time_s"] == 3.21 and s["epoch_time_estimated"] is False
    assert (s["final_accuracy"], s["train_loss"]) == (0.6123, 1.2346)
    assert (s["sync_check"], s["bn_stats_drift"], s["exit_code"]) == ("pass", 2, EXIT_OK)
    assert list(s)[-1] == "exit_code"


def test_without_a_full_epoch_the_epoch_time_is_estimated_from_the_step_time():
    s = summary.build(HEADER, timed(warmup=1, steps=3, step_s=0.5), summary.Outcome(), **RUN)
    validate(s)
    assert s["epoch_time_s"] == 5.0 and s["epoch_time_estimated"] is True  # 10 steps per epoch x 0.5 s
    assert s["sync_check"] == "skipped" and s["sync_mismatched"] == [] and s["bn_stats_drift"] == 0


def test_no_timed_step_gives_nulls_not_zeros():
    s = summary.build(HEADER, timed(warmup=5, steps=0, step_s=1.0), summary.Outcome(), **RUN)
    validate(s)
    assert s["timed_steps"] == 0
    for key in ("images_per_sec", "images_per_sec_per_rank", "step_time_s", "data_time_s", "epoch_time_s"):
        assert s[key] is None, key
    assert s["epoch_time_estimated"] is False


def test_a_failed_sync_check_sets_the_exit_code():
    out = summary.Outcome(sync={"result": "fail", "mismatched": ["fc.weight"], "bn_stats_drift": []})
    s = summary.build(HEADER, timed(warmup=1, steps=2, step_s=1.0), out, **RUN)
    validate(s)
    assert (s["sync_check"], s["sync_mismatched"], s["exit_code"]) == ("fail", ["fc.weight"], EXIT_SYNC)
