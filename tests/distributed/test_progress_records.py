"""Progress records on real gloo process groups: ddp-train's (one per log interval, every rank, schema-valid,
resumed runs go on from the checkpoint step), --progress-records off, --tensorboard read back with
tensorboard's own reader, and the Lightning callback under torchrun (the real lightning package)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ddp_helpers import TOY, env, ok, summary, torchrun

pytestmark = [pytest.mark.distributed]
SCHEMA = json.loads((resources.files("ddp_train") / "progress.schema.json").read_text(encoding="utf-8"))


def records(text: str) -> list[dict]:
    return [json.loads(ln) for ln in text.splitlines() if ln.startswith('{"event":"progress"')]


def test_ddp_train_records_every_interval_on_every_rank_and_resume_from_checkpoint_step(tmp_path):
    p = ok(torchrun(2, TOY + ["--max-steps", "10", "--log-interval", "2", "--checkpoint-every", "4",
                              "--output-dir", str(tmp_path), "--tensorboard", str(tmp_path / "tb")])[0])
    recs = records(p.stdout)
    for r in recs:
        jsonschema.Draft202012Validator(SCHEMA).validate(r)
    for rank in (0, 1):
        mine = [r for r in recs if r["rank"] == rank]
        assert [r["step"] for r in mine] == [2, 4, 6, 8, 10], p.stdout
        assert all(r["total"] == 10 and r["world_size"] == 2 and r["samples_per_sec"] > 0 for r in mine)
    assert [r["checkpoint"] for r in recs if r["rank"] == 0][-1] == {"step": 8, "path": str(tmp_path / "ckpt-00000008.pt")}
    assert summary(p)["steps"] == 10
    # TensorBoard: the same loss values, read back by tensorboard's own reader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    loss = [(e.step, round(e.value, 4)) for e in acc.Scalars("train/loss")]
    assert loss == [(r["step"], r["loss"]) for r in recs if r["rank"] == 0]
    assert {"train/lr", "train/samples_per_sec", "eval/test_acc"} <= set(acc.Tags()["scalars"])
    # a resumed run goes on from the checkpoint's step, and says where it came from
    p2 = ok(torchrun(2, TOY + ["--max-steps", "14", "--log-interval", "2", "--output-dir", str(tmp_path),
                               "--resume", "auto", "--progress-records", "on"], DDPCTL_RESTART_COUNT="1")[0])
    again = [r for r in records(p2.stdout) if r["rank"] == 1]
    assert [r["step"] for r in again] == [12, 14] and all(r["restart"] == 1 for r in again)
    assert again[0]["checkpoint"]["step"] == 10


def test_tensorboard_missing_stops_every_rank_alike_before_the_process_group(tmp_path):
    """An environment without the tensorboard package (as the CPU image): made here by a package of that name
    on PYTHONPATH whose import fails as a missing one does. Both ranks stop with the same usage error (exit 2),
    none reports a lost peer."""
    import os

    shadow = tmp_path / "shadow" / "tensorboard"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tensorboard'\")\n")
    path = os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])
    p = torchrun(2, TOY + ["--max-steps", "2", "--tensorboard", str(tmp_path / "tb")], PYTHONPATH=path)[0]
    assert p.returncode != 0
    assert p.stderr.count("ddp-train: error: --tensorboard needs the tensorboard package") == 2, p.stderr[-3000:]
    assert "lost a peer" not in p.stderr + p.stdout and not (tmp_path / "tb").exists()


def test_progress_records_off(tmp_path):
    p = ok(torchrun(2, TOY + ["--max-steps", "4", "--log-interval", "1", "--progress-records", "off"])[0])
    assert records(p.stdout) == [] and summary(p)["steps"] == 4


def test_report_helper_is_stdlib_only_and_fills_in_the_launch():
    import subprocess
    import sys

    src = resources.files("ddp_train") / "observe" / "progress.py"
    code = (f"import sys, importlib.util; spec = importlib.util.spec_from_file_location('p', {str(src)!r}); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "m.report(step=3, total=9, loss=0.5, checkpoint_step=2, checkpoint_path='/c/2.pt'); "
            "print(sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'ddp_train', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=env(RANK="3", WORLD_SIZE="4", GROUP_RANK="1", DDPCTL_RESTART_COUNT="2")).stdout
    line, mods = out.splitlines()
    rec = json.loads(line)
    jsonschema.Draft202012Validator(SCHEMA).validate(rec)
    assert (rec["step"], rec["total"], rec["rank"], rec["node"], rec["restart"]) == (3, 9, 3, 1, 2)
    assert rec["checkpoint"] == {"step": 2, "path": "/c/2.pt"} and mods == "[]"


def test_lightning_callback_two_ranks_on_gloo(tmp_path):
    pytest.importorskip("lightning")
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "support" / "lightning_job.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script), "6"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env(DDPCTL_CHECKPOINTS=str(tmp_path)))
    assert p.returncode == 0, p.stderr[-3000:]
    recs = records(p.stdout)
    for r in recs:
        jsonschema.Draft202012Validator(SCHEMA).validate(r)
    # 6 steps per epoch per rank (96 samples / 8 / 2 ranks), 2 epochs: a record every 2 steps, on both ranks
    for rank in (0, 1):
        assert [r["step"] for r in recs if r["rank"] == rank] == [2, 4, 6, 8, 10, 12]
    assert all(r["total"] == 12 and r["loss"] is not None and r["epochs"] == 2 for r in recs)
    assert any(r["checkpoint"] and r["checkpoint"]["step"] == 6 for r in recs)  # saved at the first epoch's end
