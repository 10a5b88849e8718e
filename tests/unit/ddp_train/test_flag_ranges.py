"""ddp_train.config.flag_types: every numeric flag of ``ddp-train`` is finite and within the range the run can use;
a value outside it is one usage line at parsing (exit 2), never a traceback, a NaN in the summary or a wait that
never ends later in the run."""

from __future__ import annotations

import argparse

import pytest

from ddp_train.__main__ import main
from ddp_train.config.flag_types import MAX_BUCKET_MB, MAX_RANKS, MAX_SEED, WEEK_S
from ddp_train.config.flags import build_parser
from ddp_train.config.settings import parse_args
from ddp_train.errors import EXIT_USAGE, TrainError

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


def typed_actions():
    return [a for a in build_parser()._actions if a.option_strings and a.type is not None]


def test_no_flag_takes_a_plain_float():
    """``type=float`` lets nan and inf through: every float flag goes through flag_types."""
    assert [a.option_strings[0] for a in typed_actions() if a.type in (float, int)] == [
        "--debug-perturb-rank", "--debug-exit-rank", "--debug-exit-step"]  # hidden test hooks, compared to ints


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e400", "-1e400"])
def test_every_typed_flag_refuses_nan_and_infinity(text):
    for action in typed_actions():
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            action.type(text)


@pytest.mark.parametrize("argv,needle", [
    (["--momentum", "-5"], "--momentum: must be >= 0 and < 1, got '-5'"),
    (["--momentum", "1"], "--momentum: must be >= 0 and < 1"),
    (["--label-smoothing", "2"], "--label-smoothing: must be >= 0 and <= 1, got '2'"),
    (["--label-smoothing", "-0.1"], "--label-smoothing: must be >= 0"),
    (["--warmup-epochs", "nan"], "--warmup-epochs: must be a finite number, got 'nan'"),
    (["--warmup-epochs", "inf"], "--warmup-epochs: must be a finite number"),
    (["--warmup-epochs", "-1"], "--warmup-epochs: must be >= 0"),
    (["--warmup-epochs", "1e300"], "--warmup-epochs: must be >= 0 and <= 1000000"),
    (["--seed", "99999999999999999999999"], f"--seed: must be >= 0 and <= {MAX_SEED}"),
    (["--seed", "-1"], "--seed: must be >= 0"),
    (["--lr", "nan", "--max-steps", "3"], "--lr: must be a finite number"),
    (["--lr", "1e300"], "--lr: must be > 0 and <= 1000000"),
    (["--weight-decay", "-1"], "--weight-decay: must be >= 0, got '-1'"),
    (["--weight-decay", "inf"], "--weight-decay: must be a finite number"),
    (["--pg-timeout", "inf"], "--pg-timeout: must be a finite number"),
    (["--pg-timeout", "nan"], "--pg-timeout: must be a finite number"),
    (["--pg-timeout", "1e300"], "--pg-timeout: must be > 0 and <= 604800 (seconds, at most a week)"),
    (["--connect-timeout", "nan"], "--connect-timeout: must be a finite number"),
    (["--connect-timeout", "0"], "--connect-timeout: must be > 0"),
    (["--bucket-mb", "nan"], "--bucket-mb: must be a finite number"),
    (["--bucket-mb", "1e300"], f"--bucket-mb: must be > 0 and <= {MAX_BUCKET_MB}"),
    (["--world-size", str(MAX_RANKS + 1), "--rank", "0"], f"--world-size: must be > 0 and <= {MAX_RANKS}"),
    (["--max-steps", "99999999999999999999999"], "--max-steps: must be <= 9223372036854775807"),
    (["--debug-step-sleep", "nan"], "--debug-step-sleep: must be a finite number"),
    (["--lr", "x" * 1000], "--lr: expected a number, got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'..."),
    (["--checkpoint-interval", "9" * 400 + "h"], "the time must be a finite duration"),
])
def test_a_value_out_of_range_is_one_usage_line(argv, needle, capsys):
    assert main(TINY + argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert len(err) < 300


def test_compare_refuses_a_nan_tolerance(capsys):
    assert main(["compare", "a.pt", "b.pt", "--atol", "nan"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--atol: must be a finite number" in err and err.count("\n") == 1


def test_the_ends_of_each_range_are_accepted():
    c = parse_args(["--momentum", "0", "--label-smoothing", "1", "--seed", str(MAX_SEED), "--weight-decay", "0",
                    "--pg-timeout", str(WEEK_S), "--connect-timeout", "0.5", "--warmup-epochs", "0",
                    "--bucket-mb", str(MAX_BUCKET_MB), "--lr", "1e-9", "--world-size", str(MAX_RANKS),
                    "--rank", str(MAX_RANKS - 1)])
    assert (c.momentum, c.label_smoothing, c.seed, c.weight_decay) == (0.0, 1.0, MAX_SEED, 0.0)
    assert (c.pg_timeout, c.connect_timeout, c.lr_warmup_epochs, c.bucket_mb) == (WEEK_S, 0.5, 0.0, MAX_BUCKET_MB)
    assert parse_args(["--momentum", "0.999"]).momentum == 0.999


def test_errors_are_train_errors_with_the_usage_code():
    with pytest.raises(TrainError) as e:
        parse_args(["--momentum", "nan"])
    assert e.value.code == EXIT_USAGE and not e.value.retryable
