"""ddp_train.checkpoint.state in one CPU process with real torch: the payload, save and resume (parts, position,
RNG states), and --resume auto with nothing there."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from parts_builder import TINY, build

from ddp_train.checkpoint import state as checkpoint_state
from ddp_train.checkpoint import storage as checkpoint
from ddp_train.data.position import Position
from ddp_train.errors import TrainError
from ddp_train.loop.step_runner import StepRunner
from ddp_train.model import parts


def test_checkpoint_state_round_trip_restores_parts_position_and_rng(tmp_path):
    argv = TINY + ["--output-dir", str(tmp_path)]
    a, rt, num, inp, plan, p = build(argv)
    parts.wrap(a, rt, p, plan=plan, n_dp=1)
    for step, (x, y) in zip(range(3), inp.loader.epoch(0), strict=False):
        StepRunner(rt, p, graph_mode=False, pre_capture_iters=0, acc=torch.zeros(2)).step(x, y, step)
        p.schedule.step()
    pos = Position(epoch=0, step_in_epoch=3, global_step=3)
    body = checkpoint_state.payload(model=p.core, optimizer=p.optimizer, schedule=p.schedule, pos=pos,
                                    rngs=checkpoint_state.gather_rng(rt), global_batch=32, epoch_steps=4,
                                    steps_per_epoch=4, config=checkpoint_state.identity(
                                        a, world=1, per_rank_batch=32, strategy="single"))
    assert set(checkpoint.REQUIRED) - {"format"} <= set(body)
    assert (body["epoch_sample"], body["segment"], body["samples_done"]) == (96, None, 96)
    path = checkpoint.save(str(tmp_path), body)
    want_rand = torch.rand(3)  # what this process draws next
    # a fresh run resumes from it: same weights, optimizer, schedule, position and RNG stream
    a2, rt2, _, inp2, _, p2 = build(argv + ["--resume", "auto"])
    got_path, got_pos = checkpoint_state.resume(a2, rt2, p2, per_rank_batch=32, length=inp2.train_split.length)
    assert got_path == path and got_pos == pos
    for t1, t2 in zip(p.core.state_dict().values(), p2.core.state_dict().values(), strict=True):
        assert torch.equal(t1, t2)
    assert p2.schedule.state_dict() == p.schedule.state_dict() and p2.schedule.samples_done == 96
    assert p2.optimizer.param_groups[0]["lr"] == p.optimizer.param_groups[0]["lr"]
    assert torch.equal(torch.rand(3), want_rand)


def test_resume_auto_with_nothing_there_starts_fresh_and_a_named_missing_one_is_refused(tmp_path):
    a, rt, _, inp, _, p = build(TINY + ["--output-dir", str(tmp_path), "--resume", "auto"])
    assert checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128) == (None, Position())
    a = dataclasses.replace(a, resume=str(tmp_path / "none.pt"))
    with pytest.raises(TrainError, match="not usable"):
        checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128)
