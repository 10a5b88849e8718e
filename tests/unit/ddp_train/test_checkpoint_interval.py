"""ddp_train.config.checkpoint_interval: the --checkpoint-interval syntax (steps, durations, both) and its errors."""

from __future__ import annotations

import argparse

import pytest

from ddp_train.config.checkpoint_interval import CheckpointInterval, parse_interval


@pytest.mark.parametrize("text,steps,seconds", [
    ("200", 200, 0), ("30s", 0, 30), ("5m", 0, 300), ("1h30m", 0, 5400), ("1.5h", 0, 5400),
    ("500,10m", 500, 600), ("10m,500", 500, 600), ("2m30s", 0, 150), ("off", 0, 0), ("0", 0, 0)])
def test_checkpoint_interval_syntax(text, steps, seconds):
    assert parse_interval(text) == CheckpointInterval(steps, seconds)


@pytest.mark.parametrize("text", ["5x", "m", "1,2", "5m,1h", "-3", "1h-2m", "", "5 minutes"])
def test_checkpoint_interval_rejects_bad_text(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_interval(text)
