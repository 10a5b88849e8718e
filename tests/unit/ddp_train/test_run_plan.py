"""ddp_train.config.run_plan: the rules that relate the config to the launch and the step plan (strategy, own
reducer, flags only some plans accept, the steps left out of the throughput figures)."""

from __future__ import annotations

import pytest

from ddp_train.comm.compression import CommPlan
from ddp_train.config import run_plan
from ddp_train.config.settings import parse_args
from ddp_train.errors import EXIT_USAGE, TrainError


def test_config_rules_of_the_launch_and_the_plan():
    a = parse_args(["--strategy", "dp"])
    with pytest.raises(TrainError, match="runs in one process") as e:
        run_plan.strategy_for(a, 2, "torchrun")
    assert e.value.code == EXIT_USAGE
    assert run_plan.strategy_for(parse_args([]), 1, "single") == "single"
    assert run_plan.strategy_for(parse_args([]), 2, "torchrun") == "ddp"
    with pytest.raises(TrainError, match="graph mode's flat reducer only"):
        run_plan.check_plan(parse_args(["--debug-skip-grad-sync"]), graph_reducer="flat", graph_mode=False)
    run_plan.check_plan(parse_args(["--grad-compression", "bf16"]), graph_reducer="flat", graph_mode=False)  # gloo too (compression.py)
    assert run_plan.uses_own_reducer(parse_args(["--debug-reducer-in-eager", "--graph-reducer", "flat"]), "flat", False)
    flat = parse_args(["--graph-reducer", "flat"])  # auto is resolved from the link before (compression.decide)
    assert not run_plan.uses_own_reducer(flat, "flat", False) and run_plan.uses_own_reducer(flat, "flat", True)
    assert run_plan.untimed_steps(parse_args([]), stop_at=100, pre_capture_iters=None) == 5
    assert run_plan.untimed_steps(parse_args([]), stop_at=100, pre_capture_iters=11) == 12  # after the pre-capture iterations + capture
    assert run_plan.untimed_steps(parse_args([]), stop_at=10, pre_capture_iters=None) == 2
    with pytest.raises(TrainError, match="leaves no timed step"):
        run_plan.untimed_steps(parse_args(["--warmup-steps", "10"]), stop_at=10, pre_capture_iters=None)


def _comm(compression="none", graph_reducer="flat"):
    return CommPlan(compression, graph_reducer, 25.0, None, "one process: nothing to all-reduce")


def test_decide_makes_every_plan_decision_once():
    cpu = dict(device_type="cpu", strategy="ddp", precision="fp32", planned_steps=200, stop_at=200,
               distributed=True, torch_dir="/usr/lib/torch")
    plan = run_plan.decide(parse_args([]), _comm(), **cpu)
    assert (plan.step.mode, plan.graph_mode, plan.own_reducer, plan.untimed_steps) == ("eager", False, False, 5)
    assert plan.step.reason == "CUDA graphs need a GPU" and plan.comm == _comm()
    # the reducer as decided from the link, not as asked: --debug-reducer-in-eager with the bucketed reducer
    plan = run_plan.decide(parse_args(["--debug-reducer-in-eager", "--warmup-steps", "3"]),
                           _comm(graph_reducer="bucketed"), **cpu)
    assert plan.own_reducer and plan.untimed_steps == 3
    # a GPU run long enough: the whole-step graph, its timed window after the pre-capture iterations and capture
    gpu = dict(cpu, device_type="cuda", precision="bf16", planned_steps=1000, stop_at=1000)
    plan = run_plan.decide(parse_args([]), _comm(), **gpu)
    assert (plan.step.mode, plan.own_reducer) == ("graph", True)
    assert plan.untimed_steps == plan.step.pre_capture_iters + 1
    # a path with a space rules out inductor's C++ build, unless another compile backend builds none
    spaced = dict(gpu, planned_steps=40_000, stop_at=40_000, torch_dir="/my projects/torch")
    assert not run_plan.decide(parse_args([]), _comm(), **spaced).step.compile
    assert run_plan.decide(parse_args(["--debug-compile-backend", "aot_eager"]), _comm(), **spaced).step.compile
    # the flags the plan cannot honour are refused, in one line, as usage errors
    with pytest.raises(TrainError, match="--step-mode graph: CUDA graphs need a GPU") as e:
        run_plan.decide(parse_args(["--step-mode", "graph"]), _comm(), **cpu)
    assert e.value.code == EXIT_USAGE
    with pytest.raises(TrainError, match="takes --graph-reducer flat or bucketed"):
        run_plan.decide(parse_args(["--debug-reducer-in-eager"]), _comm(graph_reducer="ddp"), **cpu)
    with pytest.raises(TrainError, match="leaves no timed step"):
        run_plan.decide(parse_args(["--warmup-steps", "200"]), _comm(), **cpu)


def test_the_graph_mode_guess_before_the_link_is_measured():
    """What the start-up timing of the step's compute times: graph mode where the step plan picks it with the
    communication settings as asked (a long CUDA run), eager for a short one, eager for PowerSGD; a refused
    combination falls back to the flag (decide refuses it later, once)."""
    cuda = dict(device_type="cuda", strategy="ddp", precision="bf16", distributed=True, torch_dir="/usr/lib/torch")
    assert run_plan.graph_mode_guess(parse_args([]), planned_steps=5000, **cuda)
    assert not run_plan.graph_mode_guess(parse_args([]), planned_steps=10, **cuda)
    assert not run_plan.graph_mode_guess(parse_args(["--grad-compression", "powersgd"]), planned_steps=5000, **cuda)
    assert not run_plan.graph_mode_guess(parse_args([]), planned_steps=5000, **{**cuda, "device_type": "cpu"})
    refused = parse_args(["--step-mode", "graph", "--grad-compression", "powersgd"])
    with pytest.raises(TrainError):
        run_plan.step_for(refused, grad_compression="powersgd", graph_reducer="flat", planned_steps=5000, **cuda)
    assert run_plan.graph_mode_guess(refused, planned_steps=5000, **cuda)
