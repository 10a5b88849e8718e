"""ddp_train.loop.trainer: whole single-process runs resumed from a checkpoint (on CPU): a resume that changes the
per-rank batch at an epoch's end trains the epochs left; one with another training set or optimizer is refused
before it trains (one line, exit 5); a run that stops before its end never exits 0."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ddp_train.__main__ import main
from ddp_train.errors import EXIT_CHECKPOINT, EXIT_INTERNAL
from ddp_train.loop import trainer

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet", "--progress-records", "off"]


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The output directory of a finished one-epoch run (4 steps) and of one stopped at step 3 of 8."""
    root = tmp_path_factory.mktemp("runs")
    assert main(TINY + ["--output-dir", str(root / "base")]) == 0
    assert main(TINY + ["--output-dir", str(root / "mid"), "--epochs", "2", "--max-steps", "3"]) == 0
    return root


def _copy(base, name, tmp_path):
    shutil.copytree(base / name, tmp_path / "od")
    return str(tmp_path / "od")


def test_a_resume_at_an_epoch_end_with_a_larger_batch_trains_the_epochs_left(base, tmp_path, capsys):
    od = _copy(base, "base", tmp_path)
    capsys.readouterr()
    assert main(TINY + ["--output-dir", od, "--resume", "auto", "--epochs", "2", "--batch-size", "64"]) == 0
    s = last_json(capsys.readouterr().out)
    assert (s["steps"], s["epochs_completed"], s["exit_code"]) == (6, 1, 0)  # 4 steps of 32, then 2 of 64


@pytest.mark.parametrize("argv,needle", [
    (["--train-size", "64"], "does not fit this run's training set: it was saved with 128 training samples, this "
                             "run has 64; resume with the training set it was saved with (--train-size 128)"),
    (["--optimizer", "adamw"], "was saved with --optimizer sgd, this run has --optimizer adamw"),
])
def test_a_resume_with_another_training_set_or_optimizer_is_refused_before_it_trains(base, tmp_path, capsys, argv,
                                                                                      needle):
    od = _copy(base, "mid", tmp_path)
    before = sorted(os.listdir(od)), os.path.getsize(os.path.join(od, "metrics.jsonl"))
    capsys.readouterr()
    assert main(TINY + ["--output-dir", od, "--resume", "auto", "--epochs", "2", *argv]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert (sorted(os.listdir(od)), os.path.getsize(os.path.join(od, "metrics.jsonl"))) == before


def test_a_run_that_stops_before_its_end_never_exits_0(monkeypatch, capsys):
    setup = trainer.Trainer.setup

    def short(self):  # a step count that stops the loop early (what a wrong resume position would do)
        setup(self)
        self.stop_at = 2

    monkeypatch.setattr(trainer.Trainer, "setup", short)
    assert main(TINY) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "the run stopped at step 2, in epoch 1 of 1, before its end" in err and err.count("\n") == 1
