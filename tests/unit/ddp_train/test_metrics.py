"""ddp_train.observe.metrics: the metrics file's path rule, and progress records built from explicit values (the
step the run stops at, the newest checkpoint this rank knows of, its place in the job), one JSON line each."""

from __future__ import annotations

import json

import torch

from ddp_train.observe.metrics import GpuStats, MetricsFile, ProgressRecords

INFO = dict(epoch=0, step=4, loss=1.5, lr=0.05, step_time_s=0.01, data_time_s=0.001, images_per_sec=3200.0,
            gpu_util=None)


def _records(metrics, **kw):
    values = dict(on=True, tensorboard=None, total=40, epochs=2, saves_checkpoints=True, resumed=None,
                  metrics=metrics, gpu=GpuStats(torch.device("cpu")), elapsed=lambda: 1.25, rank=1, world_size=2,
                  local_rank=1)
    return ProgressRecords(**{**values, **kw})


def _emitted(capsys, records, **info):
    records.emit({**INFO, **info})
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_metrics_file_path_rule(tmp_path):
    assert MetricsFile.for_run(metrics_file=None, output_dir=None, is0=True).f is None
    assert MetricsFile.for_run(metrics_file=None, output_dir=str(tmp_path), is0=False).f is None
    m = MetricsFile.for_run(metrics_file=None, output_dir=str(tmp_path), is0=True)
    assert m.f.name == str(tmp_path / "metrics.jsonl")
    m.close()
    own = tmp_path / "own" / "m.jsonl"
    m = MetricsFile.for_run(metrics_file=str(own), output_dir=str(tmp_path), is0=True)
    assert m.f.name == str(own)
    m.close()


def test_progress_records_from_explicit_values(capsys):
    metrics = MetricsFile(None)
    records = _records(metrics)
    rec = _emitted(capsys, records)
    assert (rec["step"], rec["total"], rec["epoch"], rec["epochs"]) == (4, 40, 1, 2)
    assert (rec["rank"], rec["world_size"], rec["local_rank"], rec["wall_time_s"]) == (1, 2, 1, 1.25)
    assert (rec["samples_per_sec"], rec["checkpoint"]) == (3200.0, None)
    # rank 0 saved at step 10: this rank knows the step, not the path
    records.saved(10)
    assert _emitted(capsys, records, step=12)["checkpoint"] == {"step": 10, "path": None}
    # the rank that wrote it knows the path too (its metrics file records the newest checkpoint)
    metrics.write("checkpoint", step=10, path="/out/ckpt-00000010.pt")
    assert _emitted(capsys, records, step=12)["checkpoint"] == {"step": 10, "path": "/out/ckpt-00000010.pt"}
    # before any save of its own, a resumed run names the checkpoint it resumed from
    resumed = _records(MetricsFile(None), resumed=(8, "/out/ckpt-00000008.pt"))
    assert _emitted(capsys, resumed, step=9)["checkpoint"] == {"step": 8, "path": "/out/ckpt-00000008.pt"}
    # without --output-dir, nothing this run saved is named; with --progress-records off, no line at all
    assert _emitted(capsys, _records(MetricsFile(None), saves_checkpoints=False))["checkpoint"] is None
    _records(MetricsFile(None), on=False).emit(INFO)
    assert capsys.readouterr().out == ""
