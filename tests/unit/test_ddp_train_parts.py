"""ddp-train's parts, each on its own, in one CPU process with real torch: the runtime, inputs, the parts
builder, the step runner, evaluation, checkpoint state (payload, save, resume, RNG states), interval logs,
fault injection and the flag rules of config."""

from __future__ import annotations

import argparse
import random

import pytest
import torch

from ddp_train.checkpoint import state as checkpoint_state
from ddp_train.checkpoint import storage as checkpoint
from ddp_train.comm import compression
from ddp_train.config import settings as config
from ddp_train.config.settings import WORKLOAD_DEFAULTS, parse_args
from ddp_train.data import inputs
from ddp_train.data.position import Position
from ddp_train.errors import EXIT_USAGE, TrainError
from ddp_train.loop import faults
from ddp_train.loop.evaluation import Checks
from ddp_train.loop.step_runner import StepRunner
from ddp_train.model import parts
from ddp_train.observe.interval_log import IntervalLog
from ddp_train.observe.metrics import MetricsFile
from ddp_train.runtime.process import Runtime

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "2",
        "--strategy", "single", "--quiet", "--deterministic"]


def _build(argv):
    """What Trainer.setup builds, part by part."""
    a = parse_args(argv)
    rt = Runtime(a)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    num = parts.numerics(a, rt)
    inp = inputs.build(a, rt, WORKLOAD_DEFAULTS[a.workload], per_rank_batch=a.batch_size, amp_dtype=num.amp_dtype,
                       channels_last=num.channels_last)
    spe = len(inp.loader)
    a.comm = compression.decide(a, device=rt.device, world=rt.world, distributed=rt.distributed)  # as Trainer does
    plan = parts.plan_step(a, rt, precision=num.precision, planned_steps=spe * a.epochs)
    p = parts.build(a, rt, plan=plan, shape=tuple(inp.train_split.images.shape[1:]), num_classes=10,
                    global_batch=a.batch_size, steps_per_epoch=spe, total_steps=spe * a.epochs, num=num)
    return a, rt, num, inp, plan, p


def test_parts_build_a_model_that_trains_and_evaluates(tmp_path):
    a, rt, num, inp, plan, p = _build(TINY)
    assert (rt.strategy, rt.world, rt.multi, str(rt.device)) == ("single", 1, False, "cpu")
    assert (num.precision, num.amp_dtype, num.channels_last, num.n_dp) == ("fp32", None, False, 1)
    assert inp.pipeline == "device" and len(inp.loader) == 4 and plan.mode == "eager"
    parts.wrap(a, rt, p, plan=plan, n_dp=1, comm=a.comm)
    assert p.model is p.core and p.reducer is None and p.buckets is None and p.compile_units is None
    acc = torch.zeros(2)
    runner = StepRunner(rt, p, graph_mode=False, warmup_iters=0, acc=acc)
    before = [t.detach().clone() for t in p.core.parameters()]
    lrs = []
    for step, (x, y) in enumerate(inp.loader.epoch(0)):
        runner.step(x, y, step)
        p.schedule.step()
        lrs.append(p.schedule.lr())
    assert acc[0] > 0 and 0 <= acc[1] <= 128  # the epoch's loss sum and correct count, on the device
    assert any(not torch.equal(b, t) for b, t in zip(before, p.core.parameters(), strict=True))
    assert lrs == sorted(lrs, reverse=True) and p.schedule.samples_done == 128  # cosine, by samples
    checks = Checks(a, rt, p, runner, MetricsFile(None), eval_pipeline=inp.eval_pipeline, test_split=inp.test_split)
    accuracy, loss = checks.evaluate(4)
    assert 0.0 <= accuracy <= 1.0 and loss > 0 and p.core.training  # back in training mode


def test_checkpoint_state_round_trip_restores_parts_position_and_rng(tmp_path):
    argv = TINY + ["--output-dir", str(tmp_path)]
    a, rt, num, inp, plan, p = _build(argv)
    parts.wrap(a, rt, p, plan=plan, n_dp=1, comm=a.comm)
    for step, (x, y) in zip(range(3), inp.loader.epoch(0), strict=False):
        StepRunner(rt, p, graph_mode=False, warmup_iters=0, acc=torch.zeros(2)).step(x, y, step)
        p.schedule.step()
    pos = Position(epoch=0, step_in_epoch=3, global_step=3)
    body = checkpoint_state.payload(model=p.core, optimizer=p.optimizer, schedule=p.schedule, pos=pos,
                                    rngs=checkpoint_state.gather_rng(rt), global_batch=32, epoch_steps=4,
                                    steps_per_epoch=4, config=checkpoint_state.run_config(
                                        a, world=1, per_rank_batch=32, strategy="single"))
    assert set(checkpoint.REQUIRED) - {"format"} <= set(body)
    assert (body["epoch_sample"], body["segment"], body["samples_done"]) == (96, None, 96)
    path = checkpoint.save(str(tmp_path), body)
    want_rand = torch.rand(3)  # what this process draws next
    # a fresh run resumes from it: same weights, optimizer, schedule, position and RNG stream
    a2, rt2, _, inp2, _, p2 = _build(argv + ["--resume", "auto"])
    got_path, got_pos = checkpoint_state.resume(a2, rt2, p2, per_rank_batch=32, length=inp2.train_split.length)
    assert got_path == path and got_pos == pos
    for t1, t2 in zip(p.core.state_dict().values(), p2.core.state_dict().values(), strict=True):
        assert torch.equal(t1, t2)
    assert p2.schedule.state_dict() == p.schedule.state_dict() and p2.schedule.samples_done == 96
    assert p2.optimizer.param_groups[0]["lr"] == p.optimizer.param_groups[0]["lr"]
    assert torch.equal(torch.rand(3), want_rand)


def test_resume_auto_with_nothing_there_starts_fresh_and_a_named_missing_one_is_refused(tmp_path):
    a, rt, _, inp, _, p = _build(TINY + ["--output-dir", str(tmp_path), "--resume", "auto"])
    assert checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128) == (None, Position())
    a.resume = str(tmp_path / "none.pt")
    with pytest.raises(TrainError, match="not usable"):
        checkpoint_state.resume(a, rt, p, per_rank_batch=32, length=128)


def test_interval_log_counts_its_steps_and_data_time():
    log = IntervalLog(torch.device("cpu"), write=None)
    log.start()
    acc = torch.tensor([6.0, 2.0])
    log.stepped(0.5)
    log.stepped(0.25)
    log.mark(acc, {"step": 2})
    log.stepped(0.1)
    log.mark(acc, {"step": 3})
    first, second = log.ready()
    assert (first["steps"], first["data"], first["step"], first["loss_sum"]) == (2, 0.75, 2, 6.0)
    assert (second["steps"], second["data"]) == (1, 0.1) and second["seconds"] >= 0
    written = []
    log.write = written.append
    log.mark(acc, {"step": 4})
    log.write_ready()
    assert [r["step"] for r in written] == [4] and log.ready() == []


def test_faults_are_one_call_after_a_step(tmp_path):
    args = argparse.Namespace(debug_sample_log=str(tmp_path), debug_step_sleep=0.0, debug_perturb_rank=1,
                              debug_exit_rank=None, debug_exit_step=1)
    loader = argparse.Namespace(last_indices=torch.tensor([3, 1, 2]))
    core = torch.nn.Linear(2, 2)
    w = core.weight.detach().clone()
    faults.after_step(args, rank=0, world=2, epoch=0, step_in_epoch=1, global_step=1, loader=loader, core=core)
    assert torch.equal(core.weight, w)  # rank 0 is not the one to perturb
    faults.after_step(args, rank=1, world=2, epoch=0, step_in_epoch=1, global_step=1, loader=loader, core=core)
    assert not torch.equal(core.weight, w)
    assert (tmp_path / "samples-rank0.txt").read_text() == "0 1 2 3,1,2\n"


def test_config_rules_of_the_launch_and_the_plan():
    a = parse_args(["--strategy", "dp"])
    with pytest.raises(TrainError, match="runs in one process") as e:
        config.strategy_for(a, 2, "torchrun")
    assert e.value.code == EXIT_USAGE
    assert config.strategy_for(parse_args([]), 1, "single") == "single"
    assert config.strategy_for(parse_args([]), 2, "torchrun") == "ddp"
    with pytest.raises(TrainError, match="graph mode's flat reducer only"):
        config.check_plan(parse_args(["--debug-skip-grad-sync"]), graph_mode=False)
    config.check_plan(parse_args(["--grad-compression", "bf16"]), graph_mode=False)  # gloo too (compression.py)
    assert config.uses_own_reducer(parse_args(["--debug-reducer-in-eager", "--graph-reducer", "flat"]), False)
    flat = parse_args(["--graph-reducer", "flat"])  # auto is resolved from the link before (compression.decide)
    assert not config.uses_own_reducer(flat, False) and config.uses_own_reducer(flat, True)
    assert config.timed_warmup(parse_args([]), stop_at=100, graph_warmup_iters=None) == 5
    assert config.timed_warmup(parse_args([]), stop_at=100, graph_warmup_iters=11) == 12  # after warm-up + capture
    assert config.timed_warmup(parse_args([]), stop_at=10, graph_warmup_iters=None) == 2
    with pytest.raises(TrainError, match="leaves no timed step"):
        config.timed_warmup(parse_args(["--warmup-steps", "10"]), stop_at=10, graph_warmup_iters=None)
