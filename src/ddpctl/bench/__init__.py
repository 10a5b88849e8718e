"""``ddpctl bench``: the standard multi-GPU test report.

Pure parts: :mod:`~ddpctl.bench.plan` (the matrix), :mod:`~ddpctl.bench.efficiency` (the arithmetic),
:mod:`~ddpctl.bench.report` (report.json / report.md), :mod:`~ddpctl.bench.compare`. Side effects:
:mod:`~ddpctl.bench.runner` (running programs), :mod:`~ddpctl.bench.plots` (PNGs), :func:`run_bench` (all of it).
ddpctl never imports torch: measurements come from ``python -m ddp_train...`` programs.
"""

from __future__ import annotations

from pathlib import Path

from ddpctl.bench.plan import BenchOptions, plan


def run_bench(options: BenchOptions, outdir: Path, *, runner=None, progress=None, command: str = "ddpctl bench",
              python: str | None = None, plots: bool = True, resume: bool = False) -> tuple[dict, list[Path]]:
    """Run the matrix and write the report into ``outdir``. Returns the report and the files written.

    ``resume``: ``outdir`` holds an earlier call's report of the same options; keep what it measured and run
    the rest (:mod:`ddpctl.bench.resume`)."""
    import datetime
    import time

    from ddpctl import host_gpus as host
    from ddpctl.bench import resume as resume_state
    from ddpctl.bench.plan import plan as make_plan
    from ddpctl.bench.plan import validate
    from ddpctl.bench.programs import HostRunner
    from ddpctl.bench.progress import BenchProgress
    from ddpctl.bench.runner import SKIPPED, collect_sysinfo, execute

    validate(options)  # names and ranges, before anything runs (GPU counts are checked once known)
    state = None
    if resume:
        state = resume_state.load(outdir)
        resume_state.check_options(state, options, outdir)
    progress = progress or BenchProgress()
    if runner is None:
        if options.runtime == "docker":
            from ddpctl.bench.docker import DockerRunner

            runner = DockerRunner.from_options(options)
        else:
            runner = HostRunner(python=python)
    runner.preflight()
    progress.note(f"collecting system info ({runner.describe()})")
    sysinfo = collect_sysinfo(runner)
    if state is not None:
        resume_state.check_host(state, sysinfo, outdir)
    the_plan = make_plan(options, int(sysinfo.get("gpu_count") or 0))
    smi = host.nvidia_smi()
    for note in the_plan.skipped:
        progress.note(f"skipped: {note}")
    outdir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    kept_runs, kept_probes = resume_state.kept(state, the_plan) if state else ({}, {})
    # the report's first call gives its date and command; each resumed call is listed after it
    created = state.get("created", now) if state else now
    first_command = state.get("command", command) if state else command
    source = resume_state.source_fingerprint(sysinfo.get("source"))
    if state is not None and (change := resume_state.source_change(state, source)):
        progress.note(change)
    this_call = {"created": now, "command": command, "duration_s": 0.0, "runs": 0, "source": source}
    calls = [*(state.get("calls") or []), this_call] if state else [this_call]
    matrix = resume_state.matrix_options(options)
    started = time.monotonic()

    def save(bench) -> None:
        """After every probe and run: a call stopped from outside leaves what it measured for --resume."""
        this_call["duration_s"] = round(time.monotonic() - started, 1)
        this_call["runs"] = sum(1 for r in bench.runs if (r.cell.key, r.repeat) not in kept_runs
                                and not (r.error or "").startswith(SKIPPED))
        resume_state.save(outdir, resume_state.dump(bench, matrix=matrix, command=first_command, created=created,
                                                    calls=calls))

    bench = execute(the_plan, runner, sysinfo, outdir, progress, cell_timeout=options.cell_timeout_s,
                    extra_args=options.extra_args, time_budget=options.time_budget_s, kept_runs=kept_runs,
                    kept_probes=kept_probes, on_change=save)
    save(bench)
    return _write(bench, options, outdir, hardware_host=smi, command=first_command, created=created, calls=calls,
                  plots=plots)


def _write(bench, options: BenchOptions, outdir: Path, *, hardware_host: dict, command: str, created: str,
           calls: list[dict], plots: bool, hardware: dict | None = None,
           rebuilt: dict | None = None) -> tuple[dict, list[Path]]:
    """The analysis of what ``bench`` measured, written into ``outdir`` (report.json, report.md, the plots).
    ``rebuilt`` (bench rebuild): recorded in the report, which is checked against its schema before anything is
    written (a state that passed its own schema may still hold figures no report can)."""
    from ddpctl.bench import report

    the_plan = bench.plan
    bench.seconds = sum(c["duration_s"] for c in calls)
    opts = {
        "workloads": sorted({c.workload for c in the_plan.cells}),
        "strategies": sorted({c.strategy for c in the_plan.cells}),
        "gpus": list(the_plan.gpu_counts),
        "pipelines": sorted({c.pipeline for c in the_plan.cells}),
        "warmup": options.warmup,  # None: each workload's default (the cells record what ran)
        "steps": options.steps,
        "repeat": the_plan.repeat,
        "batch_size": options.batch_size,
        "probe_max_bytes": the_plan.probe_max_bytes,
        "extra_args": list(options.extra_args),
    }
    try:
        rep = report.build_report(bench, hardware_host=hardware_host, options=opts, command=command,
                                  created=created, runtime=options.runtime)
    except (TypeError, KeyError, ValueError, ZeroDivisionError) as exc:  # a state edited into figures no run gives
        from ddpctl.bench.resume import STATE_FILE
        from ddpctl.errors import UsageError

        raise UsageError(f"{outdir}: the measurements in {STATE_FILE} make no report ({exc.__class__.__name__}); "
                         "nothing written", "start the matrix afresh in another directory") from None
    if hardware:
        rep["hardware"] = hardware
    if calls[0].get("source"):
        rep["source"] = calls[0]["source"]
    if len(calls) > 1:
        rep["resumed"] = calls[1:]
    if rebuilt is not None:
        rep["rebuilt"] = rebuilt
        _check(rep, outdir)
    written = report.write_report(rep, outdir, plots=plots)
    return rep, written


def _check(rep: dict, outdir: Path) -> None:
    import json

    from ddpctl.bench.compare import MAX_REPORT_BYTES
    from ddpctl.bench.report import schema
    from ddpctl.bench.resume import STATE_FILE
    from ddpctl.errors import UsageError
    from ddpctl.joboutput.visible import visible
    from ddpctl.validate.schema import Validator

    if len(json.dumps(rep, indent=2)) > MAX_REPORT_BYTES:  # what bench compare, forecast and rebuild would refuse
        raise UsageError(f"bench rebuild {outdir}: the report made from {STATE_FILE} would be larger than "
                         f"{MAX_REPORT_BYTES >> 20} MiB; nothing written", "rebuild it with the ddpctl that wrote it")
    issues = Validator(schema(), strict=False).issues({**rep, "plots": []})
    if issues:
        where = visible("/".join(str(p) for p in issues[0].path))[:80] or "(top)"
        raise UsageError(f"bench rebuild {outdir}: {STATE_FILE} holds figures no report can ({where} "
                         f"{visible(issues[0].message)[:120]}); nothing written", "rebuild it with the ddpctl that wrote it")


def rebuild_report(outdir: Path, *, plots: bool = True) -> tuple[dict, list[Path]]:
    """``ddpctl bench rebuild DIR``: rewrite ``outdir``'s report from its ``bench-state.json`` with this ddpctl:
    every run and probe as it was measured, the analysis (figures, diagnosis, forecast and its validation) as
    this version makes it; nothing runs. The hardware section is kept from the report.json there (the state
    holds the GPUs, not the driver and topology nvidia-smi gave). Returns the report and the files written."""
    import datetime

    from ddpctl.bench import resume as resume_state
    from ddpctl.bench.compare import load_report
    from ddpctl.bench.plan import plan as make_plan
    from ddpctl.errors import UsageError
    from ddpctl.joboutput.visible import visible

    state = resume_state.load(outdir, rebuild=True)
    try:
        options = resume_state.options_of(state)
        the_plan = make_plan(options, int((state.get("sysinfo") or {}).get("gpu_count") or 0))
    except (TypeError, ValueError, KeyError, UsageError) as exc:
        detail = exc.problem if isinstance(exc, UsageError) else str(exc) if isinstance(exc, ValueError) else ""
        raise UsageError(f"bench rebuild {outdir}: {resume_state.STATE_FILE} does not describe a matrix this "
                         f"ddpctl can plan ({visible(detail)[:160] or exc.__class__.__name__})",
                         "rebuild it with the ddpctl that wrote it") from None
    bench = resume_state.measured(state, the_plan)
    old = load_report(outdir / "report.json") if (outdir / "report.json").is_file() else {}
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    rep, written = _write(bench, options, outdir, hardware_host={}, command=state["command"], created=state["created"],
                          calls=state["calls"], plots=plots, hardware=old.get("hardware"),
                          rebuilt={"created": now, "source": resume_state.package_fingerprint()})
    for name in set(old.get("plots") or []) - set(rep["plots"]):  # a plot the report no longer shows (--no-plots)
        stale = outdir / name
        if name.endswith(".png") and "/" not in name and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    return rep, written


__all__ = ["BenchOptions", "plan", "rebuild_report", "run_bench"]
