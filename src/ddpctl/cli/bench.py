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
        "on the GPU), dataloader (per-sample CPU DataLoader), classic (the reference input pipeline: torchvision model, PIL "
        "transforms, fp32, eager; the reference every report compares with) (default: all three on GPU, device "
        "on CPU; gpu: deprecated spelling of device).", show_default=False)] = None,
    warmup: Annotated[Optional[int], typer.Option(
        "--warmup", help="Warm-up steps per run, not timed (default per workload on GPU: "
        "toy 20, CIFAR 30, ImageNet 15; 2 on CPU).", show_default=False)] = None,
    steps: Annotated[Optional[int], typer.Option(
        "--steps", help="Timed steps per run (default per workload on GPU: toy 100, "
        "CIFAR 200, ImageNet 40; 5 on CPU).", show_default=False)] = None,
    repeat: Annotated[int, typer.Option("--repeat", "-r", help="Runs per cell, 1 to 100; the report gives the "
                                        "median and spread.")] = 1,
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
    socket_nodes: Annotated[Optional[str], typer.Option(
        "--socket-nodes", help="Comma-separated node counts of the socket emulation, each run wherever it divides "
        "a ddp cell's GPU count (e.g. 2,4: a 4-GPU cell also as 4 nodes x 1) (default: 2).",
        show_default=False)] = None,
    train_arg: Annotated[Optional[list[str]], typer.Option(
        "--train-arg", help="Extra argument for every ddp-train run, repeatable (e.g. --train-arg=--compile).",
        show_default=False)] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Write no PNG plots.")] = False,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Report directory (default: "
                                                   "bench-report).", show_default=False)] = None,
    resume: Annotated[Optional[Path], typer.Option(
        "--resume", help="Go on with the report in this directory, cut by --time-budget or a machine's limit: the "
        "same options as its first call (only --time-budget, --cell-timeout, --python may change); measured runs "
        "are kept, the rest run.", show_default=False)] = None,
) -> None:
    """Run the matrix and write the report (see 'ddpctl bench --help')."""
    if ctx.invoked_subcommand is not None:
        return
    from ddpctl.api.benchmark import bench as run_bench
    from ddpctl.errors import JobFailed, UsageError

    if resume is not None and output is not None and output.resolve() != resume.resolve():
        raise UsageError(f"--resume {resume} and -o {output} name two directories",
                         "drop -o: a resumed report is written where it is")
    output = resume if resume is not None else (output or Path("bench-report"))
    command = "ddpctl " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "ddpctl bench"
    report = run_bench(output, workloads=workloads, strategies=strategies, gpus=gpus, pipelines=pipelines,
                       warmup=warmup, steps=steps, repeat=repeat, batch_size=batch_size, runtime=runtime, image=image,
                       python=python, probe=not no_probe, probe_max=probe_max, cell_timeout=cell_timeout,
                       time_budget=time_budget, links=links, socket_nodes=socket_nodes, train_args=tuple(train_arg or ()), plots=not no_plots,
                       resume=resume is not None, command=command)  # what ddpctl.bench() runs
    typer.echo(f"{report.markdown}")
    # a run the --time-budget cut is skipped (listed in the report, exit 0); a crashed or hung one failed (exit 1)
    for note in report.notes:  # said after the run: bad input must stay a one-line error
        err(note)
    err(f"bench: {len(report.cells)} cells, {len(report.failed)} failed run(s), {len(report.skipped)} skipped by "
        f"the time budget; wrote {len(report.files)} files to {output}")
    if report.failed:
        raise JobFailed(f"{len(report.failed)} benchmark run(s) failed (see {output / 'report.md'} and "
                        f"{output / 'logs'})",
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


@bench_app.command("forecast")
def forecast_cmd(
    report_dir: Annotated[Path, typer.Argument(help="A bench report directory (or its report.json).",
                                               show_default=False)],
    nodes: Annotated[Optional[str], typer.Option(
        "--nodes", help="Comma-separated node counts (default 1,2,8,64).", show_default=False)] = None,
    gpus_per_node: Annotated[Optional[str], typer.Option(
        "--gpus-per-node", help="Comma-separated GPUs per node (default: the report's largest count and 8).",
        show_default=False)] = None,
    links: Annotated[Optional[str], typer.Option(
        "--links", help="Comma-separated links between nodes: 10gbe, 25gbe, 100gbe, 200gbe, 400gbe, ib-ndr, measured "
        "(the report's two-node socket link), each optionally K NICs per node, e.g. 8x400gbe (default: 10gbe, "
        "25gbe, 100gbe, 400gbe, ib-ndr, and measured where the report has a socket probe).", show_default=False)] = None,
    workloads: Annotated[Optional[str], typer.Option(
        "--workloads", "-w", help="Comma-separated workloads of the report (default: all).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The forecast as JSON (report.json's 'forecast').")] = False,
    write: Annotated[bool, typer.Option("--write", help="Also put this forecast into the report: report.json's "
                                        "'forecast', report.md and the plots rewritten, the measurements "
                                        "untouched.")] = False,
) -> None:
    """The scaling forecast of a report, for the nodes, GPUs per node and links you name (markdown on stdout).

    Example: ddpctl bench forecast docs/benchmarks/2026-11-26-h100x4-bench --nodes 8,64 --gpus-per-node 8
    --links 25gbe,400gbe
    """
    import json

    from ddpctl.bench.compare import load_report
    from ddpctl.bench.forecast import forecast
    from ddpctl.bench.markdown import render_forecast
    from ddpctl.bench.option_lists import parse_list
    from ddpctl.errors import UsageError

    path = report_dir / "report.json" if report_dir.is_dir() else report_dir
    report = load_report(path)

    def counts(text: str | None, flag: str) -> tuple[int, ...] | None:
        items = parse_list(text, what=flag.lstrip("-"))
        if items is None:
            return None
        try:
            values = tuple(int(x) for x in items)
        except ValueError:
            values = ()
        if not values or min(values) < 1:
            raise UsageError(f"{flag} must be comma-separated positive integers, got {text!r}", f"pass e.g. {flag} 8,64")
        return values

    chosen = parse_list(workloads, what="workloads")
    known = list(dict.fromkeys(c["workload"] for c in report["cells"]))
    for w in chosen or ():
        if w not in known:
            raise UsageError(f"workload {w!r} is not in {path}", f"use one of: {', '.join(known)}")
    try:
        fc = forecast(report, nodes=counts(nodes, "--nodes"), gpus_per_node=counts(gpus_per_node, "--gpus-per-node"),
                      links=parse_list(links, what="links"), workloads=chosen)
    except ValueError as exc:
        raise UsageError(f"--links: {exc}", "pass e.g. --links 25gbe,400gbe") from None
    if write:
        from ddpctl.bench.plots import available
        from ddpctl.bench.report import write_report

        write_report({**report, "forecast": fc}, path.parent, plots=available())
    if as_json:
        typer.echo(json.dumps(fc, indent=2))
        return
    hw = report["hardware"]
    machine = f"{hw.get('gpu_count')} x {hw.get('gpu_model')}" if hw.get("gpu_count") else "CPU processes"
    typer.echo(f"# Scaling forecast from {path} ({machine}, {report['created']})\n")
    typer.echo("\n".join(render_forecast(fc, "GPUs" if report["plan"]["device"] == "cuda" else "procs")).rstrip("\n"))


@bench_app.command("rebuild")
def rebuild(
    report_dir: Annotated[Path, typer.Argument(help="A bench report directory (with its bench-state.json).",
                                               show_default=False)],
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Write no PNG plots.")] = False,
) -> None:
    """Rewrite a report from its bench-state.json with this ddpctl; nothing runs.

    Every run and probe stays as it was measured; the figures, diagnoses and the forecast with its validation
    are made again by this version (a report written by an older ddpctl gets today's analysis). The hardware
    section is kept from the report.json there.

    Example: ddpctl bench rebuild docs/benchmarks/2026-11-28-h200x4-forecast
    """
    from ddpctl.bench import rebuild_report

    rep, written = rebuild_report(report_dir, plots=not no_plots)
    worst = (rep.get("forecast") or {}).get("max_error_points")
    missed = f"; the forecast's largest miss {worst:.1f} points" if worst is not None else ""
    err(f"bench rebuild: {len(rep['cells'])} cells{missed}; wrote {len(written)} files to {report_dir}")
