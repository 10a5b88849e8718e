"""ddp_train.observe.summary: the summary builder turns the step timer's figures into the summary line, which
validates against summary.schema.json (a real run's summary: tests/distributed/test_train_summary_schema.py)."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
from timer_clock import make, run_steps

from ddp_train.errors import EXIT_OK, EXIT_SYNC
from ddp_train.observe import summary

HEADER = dict(
    world_size=2, strategy="ddp", backend="gloo", launch="torchrun", workload="toy", model="toy-cnn", device="cpu",
    device_name="cpu (x86_64, 2 cores)", data="synthetic", data_pipeline="device", precision="fp32",
    channels_last=False, compile=False, step_mode="eager", graph_reducer=None, grad_compression="none",
    sync_bn=False, per_rank_batch=32, global_batch=64, lr=0.05, steps_per_epoch=10, epochs=2, train_samples=640,
    params=24346, threads=1, step_mode_reason="CUDA graphs need a GPU")


RUN = dict(steps=20, gpu_util=None, gpu_mem_gb=None, startup_s=None, pre_capture_s=None, capture_s=None,
           checkpoint="/out/ckpt-00000020.pt", resumed_from=None, wall_time_s=12.5)


def timed(untimed, steps, step_s):
    timer, clock, _, _ = make(untimed)
    timer.resume(0)
    run_steps(timer, clock, 1, untimed, step_s=30.0)
    run_steps(timer, clock, untimed + 1, untimed + steps, step_s=step_s, data_s=step_s / 4)
    timer.pause()
    return timer


def validate(s):
    schema = json.loads((resources.files("ddp_train") / "summary.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(s)


def test_summary_figures_come_from_the_timer_and_validate():
    out = summary.Outcome(epochs_completed=2, epoch_time=3.21, train_loss=1.23456, train_acc=0.5,
                          test_acc=0.61234, test_loss=1.9, sync={"result": "pass", "mismatched": [],
                                                                 "bn_stats_drift": ["a", "b"]})
    s = summary.build(HEADER, timed(untimed=4, steps=16, step_s=0.25), out, **RUN)
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
    s = summary.build(HEADER, timed(untimed=1, steps=3, step_s=0.5), summary.Outcome(), **RUN)
    validate(s)
    assert s["epoch_time_s"] == 5.0 and s["epoch_time_estimated"] is True  # 10 steps per epoch x 0.5 s
    assert s["sync_check"] == "skipped" and s["sync_mismatched"] == [] and s["bn_stats_drift"] == 0


def test_no_timed_step_gives_nulls_not_zeros():
    s = summary.build(HEADER, timed(untimed=5, steps=0, step_s=1.0), summary.Outcome(), **RUN)
    validate(s)
    assert s["timed_steps"] == 0
    for key in ("images_per_sec", "images_per_sec_per_rank", "step_time_s", "data_time_s", "epoch_time_s"):
        assert s[key] is None, key
    assert s["epoch_time_estimated"] is False


def test_a_failed_sync_check_sets_the_exit_code():
    out = summary.Outcome(sync={"result": "fail", "mismatched": ["fc.weight"], "bn_stats_drift": []})
    s = summary.build(HEADER, timed(untimed=1, steps=2, step_s=1.0), out, **RUN)
    validate(s)
    assert (s["sync_check"], s["sync_mismatched"], s["exit_code"]) == ("fail", ["fc.weight"], EXIT_SYNC)
