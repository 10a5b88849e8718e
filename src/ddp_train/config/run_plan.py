"""The decisions made from the run's ``RunConfig`` and what the launch found, each in one place: the strategy this
launch runs (``strategy_for``, before the process group), then, once the gradient compression is chosen from the
link (``ddp_train.comm.compression.decide``), the rest in one step (``decide``): the step plan (eager or graph,
compile or not: ``step_plan``), whether graph mode's own reducer replaces DDP, the flags only some plans accept,
and the steps left out of the throughput figures. The parts read the resulting ``RunPlan``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddp_train.config import step_plan
from ddp_train.config.run_config import RunConfig
from ddp_train.errors import EXIT_USAGE, TrainError

if TYPE_CHECKING:
    from ddp_train.comm.compression import CommPlan


@dataclass(frozen=True)
class RunPlan:
    step: step_plan.StepPlan  # eager or graph, compiled or not, and why
    comm: CommPlan  # gradient compression, graph mode's reducer and the bucket size, and why
    own_reducer: bool  # graph mode's flat/bucketed reducer instead of DDP
    untimed_steps: int  # the first global steps left out of the throughput figures

    @property
    def graph_mode(self) -> bool:
        return self.step.mode == "graph"


def strategy_for(config: RunConfig, world_size: int, launch_mode: str) -> str:
    """The strategy this launch runs: --strategy, except that ddp in one plain process is single."""
    if config.strategy in ("dp", "single") and world_size > 1:
        raise TrainError(f"--strategy {config.strategy} runs in one process, but this launch has world size "
                         f"{world_size}; use --strategy ddp or start one process", EXIT_USAGE)
    if config.strategy == "ddp" and launch_mode == "single":
        return "single"  # one plain process: nothing to be data-parallel with
    return config.strategy


def decide(config: RunConfig, comm: CommPlan, *, device_type: str, strategy: str, precision: str,
           planned_steps: int, stop_at: int, distributed: bool, torch_dir: str) -> RunPlan:
    """The run's plan. ``planned_steps``: the optimizer steps of the whole run (a resumed run plans the same way,
    so it picks the same mode); ``stop_at``: the global step it stops at; ``torch_dir``: where torch is installed
    (torch.compile's C++ build cannot link under a path with a space: ``step_plan.compile_blocker``)."""
    step = step_for(config, grad_compression=comm.compression, graph_reducer=comm.graph_reducer,
                    device_type=device_type, strategy=strategy, precision=precision, planned_steps=planned_steps,
                    distributed=distributed, torch_dir=torch_dir)
    graph_mode = step.mode == "graph"
    check_plan(config, graph_reducer=comm.graph_reducer, graph_mode=graph_mode)
    return RunPlan(step, comm, uses_own_reducer(config, comm.graph_reducer, graph_mode),
                   untimed_steps(config, stop_at=stop_at, pre_capture_iters=step.pre_capture_iters if graph_mode else None))


def step_for(config: RunConfig, *, grad_compression: str, graph_reducer: str, device_type: str, strategy: str,
             precision: str, planned_steps: int, distributed: bool, torch_dir: str) -> step_plan.StepPlan:
    """The step plan for these communication settings (``decide``'s, and before the link is measured, the
    start-up timing's guess of graph or eager with the settings as asked: compression.decide)."""
    # a torch.compile backend other than inductor builds no C++
    blocker = None if config.debug_compile_backend not in (None, "inductor") else step_plan.compile_blocker(torch_dir)
    return step_plan.plan_step(
        requested=config.step_mode, device_type=device_type, strategy=strategy, precision=precision,
        compile=config.compile, compile_mode=config.compile_mode, sync_bn=config.sync_bn,
        grad_compression=grad_compression, planned_steps=planned_steps, distributed=distributed,
        graph_reducer=graph_reducer, compile_if_repaid=config.compile_if_repaid, compile_blocker=blocker)


def graph_mode_guess(config: RunConfig, *, device_type: str, strategy: str, precision: str, planned_steps: int,
                     distributed: bool, torch_dir: str) -> bool:
    """Graph mode or eager, as the step plan would have it with the communication settings as asked (auto: no
    compression, the flat reducer; auto never picks PowerSGD, the one setting that makes a run eager), before the
    link decides the rest: what the start-up timing of the step's compute times (compression.decide)."""
    try:
        step = step_for(config, grad_compression="none" if config.grad_compression == "auto" else config.grad_compression,
                        graph_reducer="flat" if config.graph_reducer == "auto" else config.graph_reducer,
                        device_type=device_type, strategy=strategy, precision=precision, planned_steps=planned_steps,
                        distributed=distributed, torch_dir=torch_dir)
    except TrainError:  # a refused combination: decide says so once the plan is made
        return config.step_mode == "graph"
    return step.mode == "graph"


def uses_own_reducer(config: RunConfig, graph_reducer: str, graph_mode: bool) -> bool:
    """Graph mode's own reducers (eager runs use DDP; --debug-reducer-in-eager: them too, for the CPU tests).
    ``graph_reducer``: the reducer as decided (``CommPlan.graph_reducer``)."""
    return graph_reducer in ("flat", "bucketed") and (graph_mode or config.debug_reducer_in_eager)


def check_plan(config: RunConfig, *, graph_reducer: str, graph_mode: bool) -> None:
    """The flags that only apply to some step plans (``graph_reducer`` as decided)."""
    if config.debug_skip_grad_sync and not (graph_mode and graph_reducer == "flat"):
        raise TrainError("--debug-skip-grad-sync applies to graph mode's flat reducer only", EXIT_USAGE)
    if config.debug_reducer_in_eager and graph_reducer == "ddp":
        raise TrainError("--debug-reducer-in-eager takes --graph-reducer flat or bucketed", EXIT_USAGE)
    if config.debug_per_step_buffer_broadcast and not uses_own_reducer(config, graph_reducer, graph_mode):
        raise TrainError("--debug-per-step-buffer-broadcast applies to graph mode's flat or bucketed reducer "
                         "only (or with --debug-reducer-in-eager)", EXIT_USAGE)


def untimed_steps(config: RunConfig, *, stop_at: int, pre_capture_iters: int | None) -> int:
    """The steps left out of the throughput figures: --warmup-steps (default 5, fewer for short runs); in graph
    mode (``pre_capture_iters``: its eager iterations before the capture) the timed window starts after them and
    the capture."""
    untimed = config.untimed_steps if config.untimed_steps is not None else min(5, stop_at // 5)
    if untimed >= stop_at:
        raise TrainError(f"--warmup-steps {untimed} leaves no timed step out of {stop_at}; "
                         "lower it or raise --max-steps/--epochs", EXIT_USAGE)
    if pre_capture_iters is not None and untimed <= pre_capture_iters and pre_capture_iters + 1 < stop_at:
        untimed = pre_capture_iters + 1
    return untimed
