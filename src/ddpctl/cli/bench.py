"""``ddpctl bench`` (run the matrix, write the report) and ``ddpctl bench compare A.json B.json``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ddpctl.cli.app import app, err

bench_app = typer.Typer(
    name="bench",
    help=(
        "Run the standard multi-GPU test matrix (single GPU vs DataParallel vs DDP, device (data on the GPU) vs "
        "DataLoader vs classic input, 1..N GPUs) with ddp-train, measure the all-reduce bandwidth, and write "
        "report.md, report.json and PNG plots with scaling efficiency next to what the interconnect allows.\n\n"
        "On a host without GPUs a small matrix runs on CPU processes (gloo), so the command always works.\n\n"
        "Examples:\n\n"
        "  ddpctl bench -o bench-out\n\n"
        "  ddpctl bench --gpus 1,2 --workloads cifar10-resnet18 --steps 30 --repeat 3\n\n"
        "  ddpctl bench --workloads toy --strategies single,ddp --gpus 1,2 --steps 5\n\n"
        "  ddpctl bench --runtime docker --image ddpctl/ddp-train:cpu\n\n"
        "  ddpctl bench compare before/report.json after/report.json"
    ),
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(bench_app)


@bench_app.callback()
def bench(
    ctx: typer.Context,
    workloads: Annotated[Optional[str], typer.Option(
        "--workloads", "-w", help="Comma-separated: cifar10-resnet18, imagenet-synthetic-resnet50, toy "
        "(default: the first two on GPU, toy on CPU).", show_default=False)] = None,
    strategies: Annotated[Optional[str], typer.Option(
        "--strategies", "-s", help="Comma-separated: single, dp, ddp (default: all on GPU; single,ddp on CPU).",
        show_default=False)] = None,
    gpus: Annotated[Optional[str], typer.Option(
        "--gpus", "-g", help="Comma-separated GPU counts (default 1,2,4,... up to the host's; 1,2 processes on CPU).",
        show_default=False)] = None,
    pipelines: Annotated[Optional[str], typer.Option(
        "--pipelines", "-p", help="Comma-separated ddp-train --data-pipeline names: device (data held and augmented "
        "on the GPU), dataloader (per-sample CPU DataLoader), classic (the seeds' way: torchvision model, PIL "
        "transforms, fp32, eager; the reference every report compares with) (default: all three on GPU, device "
        "on CPU; gpu: deprecated spelling of device).", show_default=False)] = None,
    warmup: Annotated[Optional[int], typer.Option(
        "--warmup", help="Warm-up steps per run, not timed (default per workload on GPU: "
        "toy 20, CIFAR 30, ImageNet 15; 2 on CPU).", show_default=False)] = None,
    steps: Annotated[Optional[int], typer.Option(
        "--steps", help="Timed steps per run (default per workload on GPU: toy 100, "
        "CIFAR 200, ImageNet 40; 5 on CPU).", show_default=False)] = None,
    repeat: Annotated[int, typer.Option("--repeat", "-r", help="Runs per cell; the report gives the median "
                                        "and spread.")] = 1,
    batch_size: Annotated[Optional[int], typer.Option(
        "--batch-size", help="Per-GPU batch (default: 256 on GPU; 32 toy/CIFAR, 8 ImageNet on CPU).",
        show_default=False)] = None,
    runtime: Annotated[str, typer.Option("--runtime", help="host (torchrun here) | docker (containers, as "
                                         "'ddpctl up').")] = "host",
    image: Annotated[Optional[str], typer.Option("--image", help="Image for --runtime docker (default: the "
                                                 "job spec's default image).", show_default=False)] = None,
    python: Annotated[Optional[str], typer.Option(
        "--python", help="Python with torch and ddp-train for --runtime host (default: this one).",
        show_default=False)] = None,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Skip the all-reduce bandwidth probe.")] = False,
    probe_max: Annotated[Optional[str], typer.Option(
        "--probe-max", help="Largest all-reduce message, e.g. 1g (default 1g on GPU, 16m on CPU).",
        show_default=False)] = None,
    cell_timeout: Annotated[float, typer.Option("--cell-timeout", help="Seconds before one run is "
                                                "stopped.")] = 900.0,
    time_budget: Annotated[Optional[float], typer.Option(
        "--time-budget", help="Seconds for the whole matrix: runs that no longer fit are skipped (listed in the "
        "report, exit 0; a crashed or hung run fails, exit 1), and the report is still written.",
        show_default=False)] = None,
    links: Annotated[Optional[str], typer.Option(
        "--links", help="Comma-separated: local (the host's own interconnect), socket (every ddp cell on an even "
        "count again as two nodes of N/2 GPUs on this host, NCCL over TCP sockets: the network-bound regime) "
        "(default: local).", show_default=False)] = None,
    train_arg: Annotated[Optional[list[str]], typer.Option(
        "--train-arg", help="Extra argument for every ddp-train run, repeatable (e.g. --train-arg=--compile).",
        show_default=False)] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Write no PNG plots.")] = False,
    output: Annotated[Path, typer.Option("-o", "--output", help="Report directory.")] = Path("bench-report"),
) -> None:
    """Run the matrix and write the report (see 'ddpctl bench --help')."""
    if ctx.invoked_subcommand is not None:
        return
    from ddpctl.bench import run_bench
    from ddpctl.bench.plan import PIPELINE_ALIASES, BenchOptions, parse_counts, parse_list
    from ddpctl.bench.plots import available
    from ddpctl.errors import JobFailed, UsageError
    from ddpctl.spec import parse_size

    probe_bytes = None
    if probe_max is not None:
        probe_bytes = parse_size(probe_max, lambda problem: UsageError(f"--probe-max: {problem}",
                                                                        "pass e.g. --probe-max 256m"))
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output} exists and is not a directory", "pass a directory path")
    options = BenchOptions(
        workloads=parse_list(workloads, what="workloads"),
        strategies=parse_list(strategies, what="strategies"),
        gpus=parse_counts(gpus),
        pipelines=parse_list(pipelines, what="pipelines"),
        warmup=warmup, steps=steps, repeat=repeat, batch_size=batch_size, runtime=runtime,
        probe=not no_probe, probe_max_bytes=probe_bytes, cell_timeout_s=cell_timeout, time_budget_s=time_budget,
        extra_args=tuple(train_arg or ()), image=image, links=parse_list(links, what="links"),
    )
    deprecated = dict.fromkeys(p for p in parse_list(pipelines, what="pipelines") or () if p in PIPELINE_ALIASES)
    plots = not no_plots and available()
    command = "ddpctl " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "ddpctl bench"
    report, written = run_bench(options, output, command=command, python=python, plots=plots)
    typer.echo(f"{output / 'report.md'}")
    # a run the --time-budget cut is skipped (listed in the report, exit 0); a crashed or hung one failed (exit 1)
    failed = [r for c in report["cells"] for r in c["runs"] if not r["ok"] and not r.get("skipped")]
    skipped = [r for c in report["cells"] for r in c["runs"] if r.get("skipped")]
    for p in report["interconnect"]:
        if not p["ok"] and str(p.get("error")).startswith("skipped:"):
            skipped.append(p)
        elif not p["ok"]:
            failed.append(p)
    if not no_plots and not plots:  # said after the run: bad input must stay a one-line error
        err("bench: matplotlib is not installed, so no plots (pip install 'ddpctl[bench]')")
    for old in deprecated:  # after the run too, for the same reason
        err(f"warning: --pipelines {old} is deprecated and goes in the next release: use {PIPELINE_ALIASES[old]} "
            "(the same pipeline, named as ddp-train's --data-pipeline)")
    err(f"bench: {len(report['cells'])} cells, {len(failed)} failed run(s), {len(skipped)} skipped by the time "
        f"budget; wrote {len(written)} files to {output}")
    if failed:
        raise JobFailed(f"{len(failed)} benchmark run(s) failed (see {output / 'report.md'} and {output / 'logs'})",
                        "fix the failing configuration or leave it out with --workloads/--strategies/--gpus")


@bench_app.command("compare")
def compare(
    a: Annotated[Path, typer.Argument(help="First report.json (A, the reference).", show_default=False)],
    b: Annotated[Path, typer.Argument(help="Second report.json (B); ratios are B/A.", show_default=False)],
) -> None:
    """Two reports side by side with B/A ratios (markdown on stdout).

    Example: ddpctl bench compare before/report.json after/report.json > diff.md
    """
    from ddpctl.bench.compare import compare as do_compare
    from ddpctl.bench.compare import load_report

    typer.echo(do_compare(load_report(a), load_report(b), name_a=str(a), name_b=str(b)), nl=False)
