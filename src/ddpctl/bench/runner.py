"""Running the matrix: the side-effect half of ``ddpctl bench``.

ddpctl never imports torch: every measurement is a separate program run (``python -m ddp_train``,
``python -m ddp_train.allreduce_probe`` under ``torchrun``, ``python -m ddp_train.sysinfo``), and the results
come back as the JSON line each program prints last. A :class:`~ddpctl.bench.programs.Runner` starts those programs: on the host
(:class:`~ddpctl.bench.programs.HostRunner`, subprocesses) or in containers
(:class:`ddpctl.bench.docker.DockerRunner`, the same path as ``ddpctl up``). The one place that knows ddp-train's flags is :func:`ddp_train_args`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl.bench.plan import WORKLOADS, Cell, Plan
from ddpctl.bench.programs import Launch, Runner, RunResult
from ddpctl.errors import JobFailed
from ddpctl.launch import NCCL_SOCKETS_ENV

TRAIN_MODULE = "ddp_train"
MIN_RUN_S = 15.0  # with a time budget, no run starts with less than this left
NOT_RUN = "skipped: the --time-budget was spent before it started"
CUT = "skipped: the --time-budget left {left:.0f} s, and the run needed more"
SKIPPED = "skipped:"  # every error that starts so is a run the budget cut, not a failure (exit 0)

# The two-node emulation's link: NCCL forced onto its TCP socket transport over loopback (no NVLink/P2P, no
# shared memory, no InfiniBand), and ddpctl's launch contract for a multi-node GPU job (NCCL socket settings
# decided in the node, ddp_train.comm.socket_transport). SOCKET_NCCL_DEFAULTS: the same link with NCCL's own socket defaults.
SOCKET_ENV = (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_IB_DISABLE", "1"),
              ("NCCL_NET", "Socket"), ("NCCL_SOCKET_IFNAME", "lo"), ("GLOO_SOCKET_IFNAME", "lo"),
              (NCCL_SOCKETS_ENV, "auto"))
SOCKET_NCCL_DEFAULTS = tuple((k, "off" if k == NCCL_SOCKETS_ENV else v) for k, v in SOCKET_ENV)
PROBE_MODULE = "ddp_train.allreduce_probe"
SYSINFO_MODULE = "ddp_train.sysinfo"


# ------------------------------------------------------------------------------ ddp-train's flags


def ddp_train_args(cell: Cell, device: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The ddp-train command line of one cell: the only mapping of bench options to ddp-train's flags.

    ``--max-steps`` counts every optimizer step, the ``--warmup-steps`` ones included (ddp-train excludes
    those from its throughput figures); ``--epochs`` is set high so that ``--max-steps``, not the end of
    ddp-train's default single epoch, ends the run (ddp-train pauses its clock at epoch boundaries); no
    evaluation; plain log lines (the output goes to a log file); the backend stays ``auto`` (nccl on GPU,
    gloo on CPU); the step mode stays ddp-train's ``auto`` except in the ``classic`` cells, which run the
    reference program (a torchvision model, ddp-train's ``classic`` pipeline: a torchvision-style dataset with PIL
    per-sample RandomCrop/Flip/ToTensor/Normalize in 4 DataLoader workers; fp32, eager steps) and
    take no ``--compile`` from the extra flags.
    """
    w = WORKLOADS[cell.workload]
    args = ["--workload", w.train_workload]
    model = w.classic_model if cell.pipeline == "classic" else w.model
    if model:
        args += ["--model", model]
    args += [
        "--strategy", cell.strategy,
        "--data-pipeline", cell.pipeline,  # the bench's pipeline names are ddp-train's
        "--batch-size", str(cell.batch_size),
        "--warmup-steps", str(cell.warmup),
        "--max-steps", str(cell.warmup + cell.steps),
        "--epochs", "1000",
        "--no-eval",
        "--progress", "lines",
    ]
    if device == "cpu":
        args += ["--device", "cpu"]
    if cell.pipeline == "classic":
        # the reference program: fp32, NCHW, no cuDNN autotuning, eager steps, 4 DataLoader workers per process
        args += CLASSIC_ARGS
        return args + [x for x in extra if x not in ("--compile",)]
    return args + list(extra)


CLASSIC_ARGS = ["--precision", "fp32", "--no-channels-last", "--no-cudnn-benchmark", "--step-mode", "eager",
                "--workers", "4"]


def parse_event(stdout: str, event: str) -> dict | None:
    """The last JSON line of ``stdout`` whose ``event`` is ``event`` (rank 0's summary)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        # torchrun may prefix a rank ("[rank0]: {...}") when asked to tee; take the JSON object part.
        brace = line.find("{")
        if brace < 0 or not line.endswith("}"):
            continue
        try:  # NaN and infinity (a diverged loss) read as null: what the report and bench-state.json hold is JSON
            data = json.loads(line[brace:], parse_constant=lambda _: None)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("event") == event:
            return data
    return None


# ---------------------------------------------------------------------------------- the whole run


@dataclass
class CellRun:
    cell: Cell
    repeat: int
    result: RunResult
    summary: dict | None
    error: str | None = None


@dataclass
class BenchRun:
    """Everything measured, before analysis."""

    sysinfo: dict
    plan: Plan
    probes: dict[int, dict] = field(default_factory=dict)  # world size -> probe JSON
    probe_errors: dict[int, str] = field(default_factory=dict)
    # the two-node emulation's link: (world size, "socket" | "socket-nccl-defaults") -> probe JSON / error
    socket_probes: dict[tuple[int, str], dict] = field(default_factory=dict)
    socket_probe_errors: dict[tuple[int, str], str] = field(default_factory=dict)
    runs: list[CellRun] = field(default_factory=list)
    seconds: float = 0.0


def collect_sysinfo(runner: Runner, timeout: float = 180.0) -> dict:
    res = runner.run(Launch("sysinfo", SYSINFO_MODULE, (), gpus=None), timeout=timeout)
    info = parse_event(res.stdout, "sysinfo") if res.ok else None
    if info is None:
        raise JobFailed(f"python -m {SYSINFO_MODULE} failed on {runner.describe()} (exit {res.returncode}: "
                        f"{res.tail(2) or 'no output'})",
                        "run ddpctl bench where torch and ddp-train are installed (see --python)")
    return info


def execute(plan: Plan, runner: Runner, sysinfo: dict, outdir: Path, progress, *,
            cell_timeout: float, extra_args: tuple[str, ...] = (), time_budget: float | None = None,
            kept_runs: dict | None = None, kept_probes: dict | None = None, on_change=None) -> BenchRun:
    """Run the probes, then every cell ``plan.repeat`` times (round-robin, so slow drift hits all cells).

    With ``time_budget`` (seconds), no run starts once the budget is spent (those runs are recorded as not
    run) and no run is given more than what is left, so the report is always written in time.
    ``kept_runs`` ((cell key, repeat) -> CellRun) and ``kept_probes`` ((world size, link) -> (data, error)): what
    an earlier call measured (``--resume``), taken as it is instead of run again. ``on_change(bench)`` is called
    after every probe and run (ddpctl bench saves its resumable state there).
    """
    bench = BenchRun(sysinfo=sysinfo, plan=plan)
    kept_runs, kept_probes = kept_runs or {}, kept_probes or {}
    changed = on_change or (lambda _bench: None)
    start = time.monotonic()

    def allowed() -> float | None:
        """Seconds the next run may take; None when the budget is spent."""
        if time_budget is None:
            return cell_timeout
        left = time_budget - (time.monotonic() - start)
        return min(cell_timeout, left) if left >= MIN_RUN_S else None

    def failure(res: RunResult, limit: float) -> str:
        """A run stopped at a limit the budget shortened was cut (skipped); at --cell-timeout it hung (failed)."""
        if res.timed_out and limit < cell_timeout:
            return CUT.format(left=limit)
        return _failure(res)
    total = plan.total_runs
    index = 0
    logs = outdir / "logs"
    gpu = plan.device == "cuda"
    probes = [(n, "local") for n in plan.probe_sizes]
    probes += [(n, link) for n in plan.socket_probe_sizes for link in ("socket", "socket-nccl-defaults")]
    socket_max = min(plan.probe_max_bytes, 256 << 20)  # ~0.2 s per all-reduce at 2 GB/s
    for n, link in probes:
        index += 1
        label = f"all-reduce probe x{n}" + ("" if link == "local" else f" (2 nodes, {link})")
        progress.start(index, total, label)
        local = link == "local"
        launch = Launch(f"probe-{n}", PROBE_MODULE, ("--max-bytes", str(plan.probe_max_bytes if local else socket_max)),
                        nprocs=n, distributed=True, gpus=n if gpu else 0, nodes=1 if local else 2,
                        env=() if local else (SOCKET_ENV if link == "socket" else SOCKET_NCCL_DEFAULTS))
        results, errors = (bench.probes, bench.probe_errors) if local else (bench.socket_probes, bench.socket_probe_errors)
        key = n if local else (n, link)
        if (n, link) in kept_probes:
            data, error = kept_probes[(n, link)]
            if data is not None:
                results[key] = data
            else:
                errors[key] = error
            progress.done("kept from the earlier call")
            continue
        limit = allowed()
        if limit is None:
            errors[key] = NOT_RUN
            progress.done(NOT_RUN)
            continue
        slug = f"probe-x{n}" + ("" if local else f"-{link}")
        res = runner.run(launch, timeout=limit, log=logs / f"{index:02d}-{slug}.log", tick=progress.tick)
        data = parse_event(res.stdout, "allreduce_probe") if res.ok else None
        if data is None:
            errors[key] = failure(res, limit)
            progress.done(errors[key] if errors[key].startswith(SKIPPED) else f"FAILED: {errors[key]}")
        else:
            results[key] = data
            progress.done(f"busbw {data['busbw_at_max_gbps']:.2f} GB/s at {_size(data['max_bytes'])}"
                          f"{'' if data.get('correct', True) else ' (WRONG SUMS)'}")
        changed(bench)
    for rep in range(plan.repeat):
        for cell in plan.cells:
            index += 1
            progress.start(index, total, cell.label + (f" (repeat {rep + 1}/{plan.repeat})" if plan.repeat > 1 else ""))
            launch = Launch(cell.key, TRAIN_MODULE, tuple(ddp_train_args(cell, plan.device, extra_args)),
                            nprocs=cell.gpus if cell.strategy == "ddp" else 1,
                            distributed=cell.strategy == "ddp",
                            gpus=cell.gpus if gpu else 0, nodes=cell.nodes,
                            env=SOCKET_ENV if cell.link == "socket" else ())
            slug = cell.key.replace("/", "-")
            if (cell.key, rep) in kept_runs:
                bench.runs.append(kept_runs[(cell.key, rep)])
                progress.done("kept from the earlier call")
                continue
            limit = allowed()
            if limit is None:
                bench.runs.append(CellRun(cell, rep, RunResult(-1, "", NOT_RUN, 0.0), None, NOT_RUN))
                progress.done(NOT_RUN)
                continue
            res = runner.run(launch, timeout=limit, log=logs / f"{index:02d}-{slug}-r{rep}.log",
                               tick=progress.tick)
            summary = parse_event(res.stdout, "summary")
            error = None
            if not res.ok:
                error = failure(res, limit)
            elif summary is None:
                error = "no summary line on stdout"
            elif not isinstance(summary.get("images_per_sec"), (int, float)) or summary["images_per_sec"] <= 0:
                error = "summary has no positive images_per_sec"
            bench.runs.append(CellRun(cell, rep, res, summary, error))
            if error:
                progress.done(error if error.startswith(SKIPPED) else f"FAILED: {error}")
            else:
                progress.done(f"{summary['images_per_sec']:,.0f} img/s")
            changed(bench)
    bench.seconds = time.monotonic() - start
    return bench


def _failure(res: RunResult) -> str:
    if res.timed_out:
        return f"timed out after {res.seconds:.0f} s"
    return f"exit {res.returncode}: {res.tail(2) or 'no output'}"


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"
