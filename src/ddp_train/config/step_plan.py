"""Which way a training step runs: op by op (eager) or as one captured CUDA graph, with or without
``torch.compile``. Pure: the flags and the planned run length in, the decision and its reason out (no torch,
so it is tested anywhere).

The graph mode captures forward, backward, DDP's gradient all-reduce and the optimizer step in one CUDA graph
(PyTorch's whole-network capture recipe: DDP built on a side stream with ``static_graph=True``, eager
iterations on that stream before capture: ``pre_capture_iters``) and replays it every step, so the host launches one graph instead of
hundreds of kernels and NCCL calls. It costs a second or so at start (the iterations before the capture are ordinary
training steps; the capture itself is well under a second), which a run of ``GRAPH_MIN_STEPS`` steps repays.
``torch.compile`` fuses kernels further (fewer, larger kernels in the captured step) but costs tens of seconds of
compilation at start; ``--compile`` combines it with the graph (the compiled forward and backward are captured
like the eager ones). ``auto`` (neither ``--compile`` nor ``--no-compile``) compiles a graph-mode run only if it
plans at least ``COMPILE_MIN_STEPS`` steps (the measured break-even of its start-up), and the reason says so;
``--no-compile-if-repaid`` turns that rule off (compile only with ``--compile``). It is the default because the
compiled run's loss curve matches the eager run's on a GPU (2x H100: docs/benchmarks/2026-11-26-benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddp_train.config.flags import GRAPH_MIN_STEPS
from ddp_train.errors import EXIT_USAGE, TrainError

# auto compile (--compile-if-repaid, the default): torch.compile for graph-mode runs long enough to repay its
# start-up. Measured (docs/benchmarks/2026-11-26-benchmarks.md, ResNet-18 CIFAR, batch 256, cold inductor cache): 4x H100:
# start-up 37.8 s with compile against 7.4 s without, 4.15 against 5.19 ms per step on one GPU: 30.4 s / 1.04 ms =
# ~29,200 steps; 2x H100: 31.8 s against 6.6-13.1 s, 4.08 against 5.17 ms: ~23,000 steps. The larger one,
# rounded up, is the threshold.
COMPILE_EXTRA_STARTUP_S = 30.4
COMPILE_SAVED_S_PER_STEP = 0.00104
COMPILE_MIN_STEPS = 30_000

# DDP needs this many eager iterations before its state is stable enough to capture (PyTorch CUDA graphs notes:
# "at least 11 DDP-enabled eager iterations"); without DDP a few suffice (cuDNN autotuning, optimizer state).
DDP_PRE_CAPTURE_ITERS = 11
PLAIN_PRE_CAPTURE_ITERS = 3
CAPTURING_COMPILE_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class StepPlan:
    mode: str  # "eager" | "graph"
    compile: bool
    reason: str
    pre_capture_iters: int  # graph mode's eager iterations before the capture, 0 otherwise

    def describe(self) -> str:
        what = {"graph": "whole step in one CUDA graph", "eager": "eager (op by op)"}[self.mode]
        return f"{what}{' + torch.compile' if self.compile else ''}: {self.reason}"


def graph_blockers(*, device_type: str, strategy: str, precision: str, compile: bool | None, compile_mode: str,
                   sync_bn: bool, grad_compression: str, graph_reducer: str = "flat") -> list[str]:
    """Why a whole-step graph cannot be used for this run (empty: it can)."""
    out = []
    if device_type != "cuda":
        out.append("CUDA graphs need a GPU")
    if strategy == "dp":
        out.append("DataParallel drives its GPUs from Python threads, which one graph cannot hold")
    if precision == "fp16":
        out.append("fp16's GradScaler checks for infs on the host every step (use bf16)")
    if compile and compile_mode in CAPTURING_COMPILE_MODES:
        out.append(f"--compile-mode {compile_mode} captures CUDA graphs of its own")
    if sync_bn:
        out.append("--sync-bn is not validated under whole-step capture")
    if grad_compression == "powersgd":
        out.append("PowerSGD (--grad-compression powersgd) keeps per-step state on the host")
    elif grad_compression not in ("none", "auto") and graph_reducer == "ddp":
        out.append("a DDP comm hook (--grad-compression) is not validated under whole-step capture; "
                   "the flat reducer (--graph-reducer flat) all-reduces in bf16 itself")
    return out


def plan_step(*, requested: str, device_type: str, strategy: str, precision: str, compile: bool | None,
              compile_mode: str, sync_bn: bool, grad_compression: str, planned_steps: int,
              distributed: bool, graph_reducer: str = "flat", compile_if_repaid: bool = True,
              compile_blocker: str | None = None) -> StepPlan:
    """The step mode of a run; flags it cannot honour (``refusal``) raise a one-line TrainError (exit 2).
    ``compile``: True/False as asked, None for auto. ``planned_steps``: the optimizer steps this process will run
    (after a resume: the steps left). ``compile_if_repaid``: with ``compile`` None, compile a graph-mode run of at
    least ``COMPILE_MIN_STEPS`` steps (the default; ``--no-compile-if-repaid`` turns it off).
    ``compile_blocker``: why torch.compile cannot work in this installation (``compile_blocker()``), or None: the
    auto rule then does not compile."""
    why = refusal(requested=requested, device_type=device_type, strategy=strategy, precision=precision,
                  compile=compile, compile_mode=compile_mode, sync_bn=sync_bn, grad_compression=grad_compression,
                  planned_steps=planned_steps, distributed=distributed, graph_reducer=graph_reducer,
                  compile_blocker=compile_blocker)
    if why:
        raise TrainError(why, EXIT_USAGE)
    plan = _plan(requested=requested, device_type=device_type, strategy=strategy, precision=precision,
                 compile=compile, compile_mode=compile_mode, sync_bn=sync_bn, grad_compression=grad_compression,
                 planned_steps=planned_steps, distributed=distributed, graph_reducer=graph_reducer)
    if not compile_if_repaid or compile is not None:
        return plan
    tag = "(auto)"
    if plan.mode != "graph":  # eager runs are never compiled by the rule; nothing to add to their reason
        return plan
    if compile_mode in CAPTURING_COMPILE_MODES:
        return replace(plan, reason=f"{plan.reason}; no torch.compile: {tag} with --compile-mode {compile_mode}, "
                                    "which captures graphs of its own")
    base = plan.reason.split("; no torch.compile unless")[0]
    if planned_steps >= COMPILE_MIN_STEPS and compile_blocker:
        return replace(plan, reason=f"{base}; no torch.compile although {planned_steps} steps >= "
                                    f"{COMPILE_MIN_STEPS}: {compile_blocker} {tag}")
    if planned_steps >= COMPILE_MIN_STEPS:
        return replace(plan, compile=True,
                       reason=f"{base}; torch.compile: {planned_steps} steps >= {COMPILE_MIN_STEPS} repay its "
                              f"~{COMPILE_EXTRA_STARTUP_S:.0f} s start-up {tag}")
    return replace(plan, reason=f"{base}; no torch.compile: {planned_steps} steps < {COMPILE_MIN_STEPS} would not "
                                f"repay its ~{COMPILE_EXTRA_STARTUP_S:.0f} s start-up {tag}")


def refusal(*, requested: str, device_type: str, strategy: str, precision: str, compile: bool | None,
            compile_mode: str, sync_bn: bool, grad_compression: str, planned_steps: int, distributed: bool,
            graph_reducer: str = "flat", compile_blocker: str | None = None) -> str | None:
    """Why these flags cannot run as asked (one line with the fix), or None: an explicit --compile on CPU where
    torch.compile cannot build; --step-mode graph where a graph is ruled out or the run is too short for it."""
    if compile and compile_blocker and device_type == "cpu":
        return f"--compile: {compile_blocker}; install torch where its path has no space, or drop --compile"
    if requested != "graph":
        return None
    blockers = graph_blockers(device_type=device_type, strategy=strategy, precision=precision, compile=compile,
                              compile_mode=compile_mode, sync_bn=sync_bn, grad_compression=grad_compression,
                              graph_reducer=graph_reducer)
    if blockers:
        return f"--step-mode graph: {blockers[0]}; use --step-mode eager or auto"
    pre_capture = DDP_PRE_CAPTURE_ITERS if distributed else PLAIN_PRE_CAPTURE_ITERS
    if planned_steps <= pre_capture:
        return (f"--step-mode graph needs more than {pre_capture} steps ({pre_capture} eager warm-up steps come before the "
                f"capture), this run has {planned_steps}; raise --max-steps or use --step-mode eager")
    return None


def _plan(*, requested, device_type, strategy, precision, compile, compile_mode, sync_bn, grad_compression,
          planned_steps, distributed, graph_reducer) -> StepPlan:
    blockers = graph_blockers(device_type=device_type, strategy=strategy, precision=precision, compile=compile,
                              compile_mode=compile_mode, sync_bn=sync_bn, grad_compression=grad_compression,
                              graph_reducer=graph_reducer)
    pre_capture = DDP_PRE_CAPTURE_ITERS if distributed else PLAIN_PRE_CAPTURE_ITERS
    want_compile = bool(compile)
    if requested == "eager":
        return StepPlan("eager", want_compile, "--step-mode eager", 0)
    if requested == "graph":
        return StepPlan("graph", want_compile, "--step-mode graph", pre_capture)
    if blockers:
        return StepPlan("eager", want_compile, blockers[0], 0)
    if planned_steps < GRAPH_MIN_STEPS:
        return StepPlan("eager", want_compile,
                        f"{planned_steps} steps planned, fewer than {GRAPH_MIN_STEPS}: a capture would not repay "
                        "its warm-up", 0)
    reason = f"{planned_steps} steps planned >= {GRAPH_MIN_STEPS}; warm-up and capture cost ~1 s"
    if compile is None:
        reason += "; no torch.compile unless --compile (--no-compile-if-repaid)"
    return StepPlan("graph", want_compile, reason, pre_capture)


def compile_blocker(torch_dir: str) -> str | None:
    """Why torch.compile cannot build here, or None. Inductor's C++ build (CPU kernels, and any host code it
    compiles) puts torch's include and library directories on a compiler command line unquoted, so with a space in
    torch's install path the link fails (``cannot find -ltorch``; seen with torch 2.13 in a virtualenv under a
    path with a space, e.g. a clone in "My Projects")."""
    if any(c.isspace() for c in torch_dir):
        return f"torch is installed under a path with a space ({torch_dir}), where inductor's C++ build fails to link"
    return None
