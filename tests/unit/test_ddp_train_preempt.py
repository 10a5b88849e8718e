"""ddp_train's checkpoint cadence syntax, the elastic re-deal of an epoch, and the stop control in one process
(the multi-process agreement runs on real gloo groups in tests/distributed/test_preemption_cpu.py)."""

from __future__ import annotations

import argparse
import os
import signal

import pytest
import torch

from ddp_train.__main__ import main
from ddp_train.checkpoint.interval import CheckpointInterval, parse_interval
from ddp_train.config.settings import parse_args
from ddp_train.data import position, sharding
from ddp_train.errors import EXIT_PREEMPTED, RETRYABLE_MIN
from ddp_train.loop import preempt


@pytest.mark.parametrize("text,steps,seconds", [
    ("200", 200, 0), ("30s", 0, 30), ("5m", 0, 300), ("1h30m", 0, 5400), ("1.5h", 0, 5400),
    ("500,10m", 500, 600), ("10m,500", 500, 600), ("2m30s", 0, 150), ("off", 0, 0), ("0", 0, 0)])
def test_checkpoint_interval_syntax(text, steps, seconds):
    assert parse_interval(text) == CheckpointInterval(steps, seconds)


@pytest.mark.parametrize("text", ["5x", "m", "1,2", "5m,1h", "-3", "1h-2m", "", "5 minutes"])
def test_checkpoint_interval_rejects_bad_text(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_interval(text)


def test_checkpoint_every_and_interval_combine_or_conflict(capsys):
    a = parse_args(["--checkpoint-every", "50", "--checkpoint-interval", "5m"])
    assert a.checkpoint_interval == CheckpointInterval(50, 300)
    assert parse_args(["--checkpoint-every", "50", "--checkpoint-interval", "50"]).checkpoint_interval.steps == 50
    assert main(["--checkpoint-every", "50", "--checkpoint-interval", "40"]) == 2
    err = capsys.readouterr().err
    assert "disagree" in err and err.count("\n") == 1
    assert main(["--checkpoint-interval", "soon"]) == 2
    assert "30s, 5m, 1h30m" in capsys.readouterr().err


def test_preempted_code_is_retryable():
    assert EXIT_PREEMPTED == 128 + signal.SIGTERM >= RETRYABLE_MIN


@pytest.mark.parametrize("length,world,batch,steps", [(512, 2, 32, 3), (100, 3, 4, 5), (96, 4, 8, 2)])
def test_redeal_at_the_same_world_size_is_the_step_based_deal(length, world, batch, steps):
    """Resuming with an unchanged world size must not change a single batch (bit-identical resumes)."""
    pos = steps * batch * world
    for r in range(world):
        old = sharding.shard_indices(length, world, r, epoch=2, seed=7)[steps * batch:]
        new = sharding.reshard_indices(length, world, r, epoch=2, seed=7, start_sample=pos)
        n = position.reshard_steps(length, world, batch, pos) * batch
        assert torch.equal(old[:n], new[:n])


@pytest.mark.parametrize("length,w1,b1,steps,w2,b2", [(512, 3, 32, 3, 2, 32), (1000, 4, 16, 7, 3, 8),
                                                        (512, 2, 32, 5, 5, 16), (100, 2, 8, 6, 3, 8)])
def test_redeal_on_another_world_sees_no_sample_twice(length, w1, b1, steps, w2, b2):
    done = torch.cat([sharding.shard_indices(length, w1, r, epoch=0, seed=3)[:steps * b1] for r in range(w1)])
    pos = steps * b1 * w1
    n = position.reshard_steps(length, w2, b2, pos)
    rest = torch.cat([sharding.reshard_indices(length, w2, r, epoch=0, seed=3, start_sample=pos)[:n * b2]
                      for r in range(w2)])
    seen = torch.cat([done, rest]).tolist()
    assert len(seen) == len(set(seen))
    assert 0 <= (length - pos) - n * b2 * w2 < w2 * b2  # all of the rest but a tail shorter than a global batch


def test_stop_control_single_process_acts_at_once():
    c = preempt.StopControl(distributed=False, rank=0)
    c.install()
    try:
        assert c.poll() == preempt.Decision()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert c.poll() == preempt.Decision(stop="SIGUSR1")
    finally:
        c.uninstall()
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_stop_control_time_cadence_is_rank0s(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(preempt.time, "monotonic", lambda: now[0])
    c0 = preempt.StopControl(distributed=False, rank=0, interval_s=60)
    c1 = preempt.StopControl(distributed=False, rank=1, interval_s=60)
    now[0] += 59
    assert not c0.poll().save
    now[0] += 1
    assert c0.poll().save and not c1.poll().save  # only rank 0's clock counts (the flag reaches the others)
    c0.saved()
    assert not c0.poll().save


def test_sigterm_in_one_process_saves_and_exits_143(tmp_path, capsys):
    """--debug-exit-... is not needed: the process signals itself from a step hook (SIGTERM at step 3)."""
    out = tmp_path / "o"
    from ddp_train.loop import faults

    orig = faults.after_step

    def hook(args, **kw):
        orig(args, **kw)
        if kw["global_step"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    faults.after_step = hook
    try:
        code = main(["--workload", "toy", "--train-size", "256", "--test-size", "64", "--batch-size", "32",
                     "--epochs", "1", "--strategy", "single", "--quiet", "--output-dir", str(out)])
    finally:
        faults.after_step = orig
    assert code == EXIT_PREEMPTED
    err = capsys.readouterr().err
    assert "ddp-train: stopped: SIGTERM at step 3 (epoch 1); checkpoint" in err and "--resume auto" in err
    assert (out / "ckpt-00000003.pt.json").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
