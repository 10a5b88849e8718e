"""ddp_train.config.settings and run_config: the command line to the frozen RunConfig (workload defaults, the
checkpoint cadence, the fields the flags become)."""

from __future__ import annotations

import dataclasses

import pytest

from ddp_train.__main__ import main
from ddp_train.config.checkpoint_interval import CheckpointInterval
from ddp_train.config.flags import build_parser
from ddp_train.config.run_config import FIELD_OF_FLAG, FOLDED_FLAGS, RunConfig
from ddp_train.config.settings import parse_args


def test_checkpoint_every_and_interval_combine_or_conflict(capsys):
    a = parse_args(["--checkpoint-every", "50", "--checkpoint-interval", "5m"])
    assert a.checkpoint_interval == CheckpointInterval(50, 300)
    assert parse_args(["--checkpoint-every", "50", "--checkpoint-interval", "50"]).checkpoint_interval.steps == 50
    assert main(["--checkpoint-every", "50", "--checkpoint-interval", "40"]) == 2
    err = capsys.readouterr().err
    assert "disagree" in err and err.count("\n") == 1
    assert main(["--checkpoint-interval", "soon"]) == 2
    assert "30s, 5m, 1h30m" in capsys.readouterr().err


def test_the_flags_become_one_frozen_typed_run_config():
    config = parse_args(["--workload", "cifar10", "--warmup-epochs", "0.5", "--warmup-steps", "7"])
    assert isinstance(config, RunConfig)
    # the workload's defaults filled in; the three warm-ups' flags under their own names
    assert (config.model, config.batch_size, config.lr, config.epochs) == ("resnet18", 256, 0.1, 1)
    assert (config.lr_warmup_epochs, config.untimed_steps) == (0.5, 7)
    assert not hasattr(config, "warmup_steps") and not hasattr(config, "checkpoint_every")
    assert config.checkpoint_interval == CheckpointInterval()  # resolved: never None
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lr = 1.0
    # every flag has a field, and nothing else does (a flag added without one fails here, not at run time)
    dests = {a.dest for a in build_parser()._actions if a.dest != "help"}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert fields == {FIELD_OF_FLAG.get(d, d) for d in dests} - set(FOLDED_FLAGS)
