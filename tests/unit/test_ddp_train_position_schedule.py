"""ddp-train's pure parts: the run position (fresh, checkpoint, resume, elastic re-deal) and the LR schedule."""

from __future__ import annotations

import math

import pytest
import torch

from ddp_train.data.position import Position, epoch_steps, resume_position, run_length, steps_per_epoch
from ddp_train.loop.lr_schedule import Schedule, factor


def _state(**kw):
    base = {"epoch": 0, "step_in_epoch": 3, "step": 3, "config": {"world_size": 3, "per_rank_batch": 32}}
    base.update(kw)
    return base


def test_steps_per_epoch_and_a_redealt_epoch():
    assert steps_per_epoch(512, 3, 32) == 5  # ceil(512 / 3) = 171 per rank: 5 whole batches
    assert epoch_steps(512, 3, 32, None) == 5
    assert epoch_steps(512, 2, 32, (288, 3)) == 3 + (512 - 288) // 64


def test_position_in_the_permutation_and_as_checkpointed():
    pos = Position(epoch=1, step_in_epoch=2, global_step=7)
    assert pos.epoch_sample(64) == 128
    assert pos.checkpoint_fields(64, 8, 8) == {"epoch_sample": 128, "segment": None, "epoch_steps": 8}
    redealt = Position(epoch=0, step_in_epoch=5, global_step=5, segment=(288, 3))
    assert redealt.epoch_sample(64) == 288 + 2 * 64
    assert redealt.checkpoint_fields(64, 6, 8) == {"epoch_sample": 416, "segment": [288, 3], "epoch_steps": 6}
    start = Position(epoch=1, step_in_epoch=0, global_step=8, segment=(288, 3))  # a segment ends with its epoch
    assert start.checkpoint_fields(64, 6, 8) == {"epoch_sample": 0, "segment": None, "epoch_steps": 8}
    pos.stepped()
    assert (pos.step_in_epoch, pos.global_step) == (3, 8)
    redealt.next_epoch()
    assert (redealt.epoch, redealt.step_in_epoch, redealt.segment) == (1, 0, None)


def test_resume_on_the_same_ranks_goes_on_with_the_same_deal():
    r = resume_position(_state(epoch_sample=288, segment=None, epoch_steps=5, samples_done=288,
                               schedule={"total": 960, "warm": 0}),
                        world=3, per_rank_batch=32, length=512, epochs=2, warmup_epochs=0)
    assert r.position == Position(0, 3, 3, None) and not r.changed and not r.redealt
    assert (r.samples_done, r.plan) == (288, {"total": 960, "warm": 0})


def test_resume_on_fewer_ranks_redeals_the_rest_of_the_epoch():
    r = resume_position(_state(epoch_sample=288, epoch_steps=5), world=2, per_rank_batch=32, length=512,
                        epochs=2, warmup_epochs=0.5)
    assert r.position == Position(0, 3, 3, (288, 3)) and r.changed and r.redealt
    assert (r.ck_world, r.ck_batch, r.epoch_sample) == (3, 32, 288)
    # an older checkpoint: no samples_done / schedule, so both follow from the checkpoint's own run
    assert r.samples_done == 3 * 96 and r.plan == {"total": 5 * 2 * 96, "warm": int(0.5 * 5) * 96}
    total, stop = run_length(r.position, epoch_steps=epoch_steps(512, 2, 32, (288, 3)), steps_per_epoch=8,
                             epochs=2, max_steps=None)
    assert total == stop == 3 + 3 + 8
    assert run_length(r.position, epoch_steps=6, steps_per_epoch=8, epochs=2, max_steps=10) == (14, 10)


def test_a_checkpoint_at_an_epochs_last_step_resumes_at_the_next_epoch():
    r = resume_position(_state(step_in_epoch=5, step=5, epoch_steps=5, segment=[100, 2]), world=2,
                        per_rank_batch=32, length=512, epochs=2, warmup_epochs=0)
    assert r.position == Position(1, 0, 5, None) and r.changed and not r.redealt


def _torch_lambdalr(groups_lr, gb, total, warm, kind, steps):
    """What ddp-train used before the schedule was its own: torch's LambdaLR over the same factor."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=groups_lr)
    done = [0]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda _s: factor(samples_done=done[0], global_batch=gb, total=total, warm=warm, kind=kind))
    lrs = []
    for _ in range(steps):
        opt.step()
        done[0] += gb
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return opt, sched, lrs


@pytest.mark.parametrize("kind", ["cosine", "constant"])
def test_schedule_matches_lambdalr_bit_for_bit_and_in_its_state(kind):
    gb, total, warm = 64, 64 * 20, 64 * 4
    opt, sched, want = _torch_lambdalr(0.1, gb, total, warm, kind, 25)
    mine = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    groups = mine.param_groups
    s = Schedule(mine, kind=kind, total=total, warm=warm, global_batch=gb)
    assert groups[0]["lr"] == 0.1 * (gb / warm)  # the first step's LR is set at once
    got = []
    for _ in range(25):
        s.step()
        got.append(s.lr())
    assert got == want and s.samples_done == 25 * gb
    assert s.state_dict() == sched.state_dict()
    assert list(s.state_dict()) == list(sched.state_dict())  # the same keys in the same order (same bytes)
    assert groups[0]["lr"] == opt.param_groups[0]["lr"] and groups[0]["initial_lr"] == 0.1


def test_schedule_shape_and_resume_with_a_new_base_lr():
    f = [factor(samples_done=n * 10, global_batch=10, total=100, warm=20, kind="cosine") for n in range(12)]
    assert f[:2] == [0.5, 1.0] and f[2] == 1.0 and f[-1] < f[5] < 1.0
    assert factor(samples_done=100, global_batch=10, total=100, warm=20, kind="cosine") == pytest.approx(0.0)
    assert factor(samples_done=60, global_batch=10, total=100, warm=20, kind="cosine") == \
        pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2)
    s = Schedule(opt, kind="cosine", total=100, warm=0, global_batch=10)
    old_opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    old = Schedule(old_opt, kind="cosine", total=100, warm=0, global_batch=20)
    old.step()
    opt.load_state_dict(old_opt.state_dict())  # new group dicts: the schedule must follow them
    s.load_state_dict(old.state_dict(), samples_done=60, plan={"total": 100, "warm": 0})
    groups = opt.param_groups
    assert (s.samples_done, s.last_epoch, s.base_lrs) == (60, 1, [0.1])
    s.rebase(0.05)  # --scale-lr on a smaller global batch
    assert all(g["initial_lr"] == 0.05 and g["lr"] == 0.05 * s.factor() for g in groups)
    s.step()
    assert s.samples_done == 70 and s.lr() == 0.05 * s.factor()
