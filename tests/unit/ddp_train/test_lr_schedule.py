"""ddp_train.model.lr_schedule: the LR schedule by samples (bit for bit LambdaLR's, its state, resume with a new
base LR)."""

from __future__ import annotations

import math
import re

import pytest
import torch

from ddp_train.model.lr_schedule import Schedule, factor


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


@pytest.mark.parametrize("state,why", [
    ({}, "its base_lrs is not a list of 1 learning rate(s)"),
    ({"base_lrs": [0.1, 0.1], "_last_lr": [0.1]}, "its base_lrs is not a list of 1"),
    ({"base_lrs": ["x"], "_last_lr": [0.1]}, "its base_lrs is not a list of 1"),
    ({"base_lrs": [0.1], "_last_lr": [float("nan")]}, "its _last_lr is not a list of 1"),
    ({"base_lrs": [0.1], "_last_lr": [0.1], "last_epoch": "3", "_step_count": 4}, "its last_epoch is not an integer"),
])
def test_a_scheduler_state_of_another_layout_is_a_value_error(state, why):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    s = Schedule(opt, kind="cosine", total=100, warm=0, global_batch=10)
    with pytest.raises(ValueError, match=re.escape(why)):
        s.load_state_dict(state, samples_done=0, plan={"total": 100, "warm": 0})
