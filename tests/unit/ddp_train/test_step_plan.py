"""ddp_train.config.step_plan: the step-mode decision (pure: flags and run length in, mode and reason out)."""



import pytest

from ddp_train.config.flags import GRAPH_MIN_STEPS
from ddp_train.config.step_plan import (
    DDP_PRE_CAPTURE_ITERS,
    PLAIN_PRE_CAPTURE_ITERS,
    plan_step,  # the decision, after the flag rules (step_plan.refusal)
)
from ddp_train.errors import EXIT_USAGE, TrainError

GPU = dict(requested="auto", device_type="cuda", strategy="ddp", precision="bf16", compile=None,
           compile_mode="default", sync_bn=False, grad_compression="none", planned_steps=1000, distributed=True)


def test_auto_on_gpu_picks_the_graph_for_runs_long_enough():
    p = plan_step(**GPU)
    assert (p.mode, p.compile, p.pre_capture_iters) == ("graph", False, DDP_PRE_CAPTURE_ITERS)
    assert p.reason.startswith(f"1000 steps planned >= {GRAPH_MIN_STEPS}")
    assert "no torch.compile" in p.reason
    assert p.describe().startswith("whole step in one CUDA graph: 1000 steps planned")
    assert plan_step(**{**GPU, "distributed": False}).pre_capture_iters == PLAIN_PRE_CAPTURE_ITERS


def test_auto_short_run_stays_eager_and_says_why():
    p = plan_step(**{**GPU, "planned_steps": GRAPH_MIN_STEPS - 1})
    assert p.mode == "eager" and f"fewer than {GRAPH_MIN_STEPS}" in p.reason


def test_compile_when_asked_or_repaid():
    assert plan_step(**{**GPU, "planned_steps": 10**6, "compile_if_repaid": False}).compile is False
    assert "no torch.compile unless --compile" in plan_step(**{**GPU, "compile_if_repaid": False}).reason
    assert "no torch.compile: 1000 steps < 30000 would not repay" in plan_step(**GPU).reason
    assert plan_step(**{**GPU, "compile": True}).compile is True
    assert plan_step(**{**GPU, "compile": True}).describe().startswith("whole step in one CUDA graph + torch.compile")
    assert plan_step(**{**GPU, "device_type": "cpu", "compile": True}).compile is True  # eager + compile, as before


def test_bf16_gradients_run_in_the_graph_with_the_flat_reducer_only():
    assert plan_step(**{**GPU, "grad_compression": "bf16"}).mode == "graph"
    p = plan_step(**{**GPU, "grad_compression": "bf16", "graph_reducer": "ddp"})
    assert p.mode == "eager" and "comm hook" in p.reason and "--graph-reducer flat" in p.reason


@pytest.mark.parametrize("change, why", [
    ({"device_type": "cpu"}, "CUDA graphs need a GPU"),
    ({"strategy": "dp"}, "DataParallel"),
    ({"precision": "fp16"}, "GradScaler"),
    ({"compile": True, "compile_mode": "reduce-overhead"}, "captures CUDA graphs of its own"),
    ({"sync_bn": True}, "--sync-bn"),
    ({"grad_compression": "bf16", "graph_reducer": "ddp"}, "comm hook"),
])
def test_what_rules_the_graph_out(change, why):
    p = plan_step(**{**GPU, **change})
    assert p.mode == "eager" and why in p.reason
    with pytest.raises(TrainError) as e:
        plan_step(**{**GPU, **change, "requested": "graph"})
    assert e.value.code == EXIT_USAGE and why in str(e.value) and "use --step-mode eager" in str(e.value)


def test_explicit_modes():
    assert plan_step(**{**GPU, "requested": "eager"}).mode == "eager"
    assert plan_step(**{**GPU, "requested": "graph", "planned_steps": 20}).mode == "graph"
    with pytest.raises(TrainError, match="needs more than 11 steps"):
        plan_step(**{**GPU, "requested": "graph", "planned_steps": DDP_PRE_CAPTURE_ITERS})


def test_compile_if_repaid_compiles_long_graph_runs_only_and_says_so():
    from ddp_train.config.step_plan import (
        COMPILE_EXTRA_STARTUP_S,
        COMPILE_MIN_STEPS,
        COMPILE_SAVED_S_PER_STEP,
    )

    # the threshold is the measured break-even, rounded up
    assert COMPILE_EXTRA_STARTUP_S / COMPILE_SAVED_S_PER_STEP <= COMPILE_MIN_STEPS
    assert COMPILE_MIN_STEPS - COMPILE_EXTRA_STARTUP_S / COMPILE_SAVED_S_PER_STEP < 1000
    long = plan_step(**{**GPU, "planned_steps": COMPILE_MIN_STEPS, "compile_if_repaid": True})
    assert long.mode == "graph" and long.compile is True
    assert long.describe() == (f"whole step in one CUDA graph + torch.compile: {COMPILE_MIN_STEPS} steps planned >= "
                               f"{GRAPH_MIN_STEPS}; warm-up and capture cost ~1 s; torch.compile: {COMPILE_MIN_STEPS} "
                               f"steps >= {COMPILE_MIN_STEPS} repay its ~30 s start-up (auto)")
    short = plan_step(**{**GPU, "planned_steps": COMPILE_MIN_STEPS - 1, "compile_if_repaid": True})
    assert short.mode == "graph" and short.compile is False
    assert short.reason.endswith(f"no torch.compile: {COMPILE_MIN_STEPS - 1} steps < {COMPILE_MIN_STEPS} would not "
                                 "repay its ~30 s start-up (auto)")
    assert "unless --compile" not in short.reason
    # an explicit --compile / --no-compile wins; the rule is the default; --no-compile-if-repaid turns it off
    assert plan_step(**{**GPU, "planned_steps": 10**6, "compile": False, "compile_if_repaid": True}).compile is False
    assert plan_step(**{**GPU, "planned_steps": 10**6}).compile is True
    off = plan_step(**{**GPU, "planned_steps": 10**6, "compile_if_repaid": False})
    assert off.compile is False and off.reason.endswith("no torch.compile unless --compile (--no-compile-if-repaid)")
    # eager runs and self-capturing compile modes: no compile, and the reason says why
    cpu = plan_step(**{**GPU, "device_type": "cpu", "planned_steps": 10**6, "compile_if_repaid": True})
    assert cpu.mode == "eager" and cpu.compile is False and cpu.reason == "CUDA graphs need a GPU"
    ro = plan_step(**{**GPU, "planned_steps": 10**6, "compile_mode": "reduce-overhead", "compile_if_repaid": True})
    assert ro.mode == "graph" and ro.compile is False and "captures graphs of its own" in ro.reason


def test_compile_blocker_stops_the_auto_rule_and_refuses_explicit_compile_on_cpu():
    from ddp_train.config.step_plan import COMPILE_MIN_STEPS, compile_blocker

    assert compile_blocker("/opt/venv/lib/python3.11/site-packages/torch") is None
    why = compile_blocker("/home/a/My Projects/.venv/lib/python3.11/site-packages/torch")
    assert why and "path with a space" in why
    p = plan_step(**{**GPU, "planned_steps": COMPILE_MIN_STEPS, "compile_blocker": why})
    assert p.mode == "graph" and p.compile is False
    assert p.reason.endswith(f"no torch.compile although {COMPILE_MIN_STEPS} steps >= {COMPILE_MIN_STEPS}: {why} (auto)")
    # an explicit --compile on CPU (inductor's C++ kernels) is refused in one line; on a GPU it is the user's call
    with pytest.raises(TrainError, match="install torch where its path has no space, or drop --compile"):
        plan_step(**{**GPU, "device_type": "cpu", "compile": True, "compile_blocker": why})
    assert plan_step(**{**GPU, "compile": True, "compile_blocker": why}).compile is True
