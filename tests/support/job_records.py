"""Progress records and summary lines as ddp-train writes them, for tests that feed ddpctl a job's output: each
one is checked against ddp_train's own schema (jsonschema, the reference implementation) before it is used, so a
test's record is one a real run could print."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema


def _schema(name: str) -> dict:
    return json.loads((resources.files("ddp_train") / name).read_text(encoding="utf-8"))


PROGRESS_SCHEMA = _schema("progress.schema.json")
SUMMARY_SCHEMA = _schema("summary.schema.json")


def summary(**fields) -> dict:
    """A complete summary (every required key), ``fields`` over ddp-train's CPU defaults."""
    out = {"event": "summary", "world_size": 2, "strategy": "ddp", "backend": "gloo", "launch": "torchrun",
           "workload": "resnet", "model": "resnet18", "device": "cpu", "device_name": "cpu", "data": "synthetic",
           "data_pipeline": "device", "precision": "fp32", "channels_last": False, "compile": False,
           "step_mode": "eager", "graph_reducer": None, "sync_bn": False, "per_rank_batch": 8, "global_batch": 16,
           "lr": 0.1, "steps_per_epoch": 8, "epochs": 1, "train_samples": 128, "params": 1000,
           "step_mode_reason": "cpu", "epochs_completed": 1, "steps": 8, "timed_steps": 6, "warmup_steps": 2,
           "images_per_sec": 100.0, "images_per_sec_per_rank": 50.0, "step_time_s": 0.16, "data_time_s": 0.0,
           "epoch_time_s": 1.3, "epoch_time_estimated": False, "final_accuracy": 0.5, "final_loss": 1.0,
           "train_loss": 1.0, "train_accuracy": 0.5, "sync_check": "pass", "sync_mismatched": [],
           "bn_stats_drift": 0, "gpu_util": None, "gpu_mem_gb": None, "startup_s": 1.0, "warmup_iters_s": 0.5,
           "capture_s": None, "checkpoint": None, "resumed_from": None, "wall_time_s": 3.0, "exit_code": 0}
    out.update(fields)
    jsonschema.Draft202012Validator(SUMMARY_SCHEMA).validate(out)
    return out


def summary_line(**fields) -> str:
    """The summary as the line ddp-train prints (``json.dumps`` with its default separators)."""
    return json.dumps(summary(**fields))
