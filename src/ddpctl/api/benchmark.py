"""``ddpctl.bench``: run the benchmark matrix and write its report, as ``ddpctl bench`` does (the CLI calls it)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ddpctl.errors import UsageError


@dataclass(frozen=True)
class Report:
    """A written benchmark report: ``data`` is report.json as a dict (bench/report.schema.json), ``files`` every
    file written under ``output``; ``failed`` the runs (and probes) that crashed or hung, ``skipped`` those the
    time budget left out. ``notes`` are the lines ``ddpctl bench`` prints after the run (no plots, a deprecated
    name)."""

    output: Path
    data: dict
    files: tuple[Path, ...]
    failed: tuple[dict, ...] = ()
    skipped: tuple[dict, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def markdown(self) -> Path:
        """report.md."""
        return self.output / "report.md"

    @property
    def cells(self) -> list[dict]:
        return list(self.data.get("cells") or [])

    @property
    def ok(self) -> bool:
        """No run failed (runs the time budget skipped are no failure)."""
        return not self.failed


def _names(value: str | Sequence[str] | None, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise UsageError(f"{what}= must be a list of names or a comma-separated string", f"pass e.g. {what}='toy'")
    return ",".join(str(v) for v in value)


def bench(output: str | os.PathLike[str] = "bench-report", *, workloads: str | Sequence[str] | None = None,
          strategies: str | Sequence[str] | None = None, gpus: str | Sequence[int] | None = None,
          pipelines: str | Sequence[str] | None = None, warmup: int | None = None, steps: int | None = None,
          repeat: int = 1, batch_size: int | None = None, runtime: str = "host", image: str | None = None,
          python: str | None = None, probe: bool = True, probe_max: str | None = None, cell_timeout: float = 900.0,
          time_budget: float | None = None, links: str | Sequence[str] | None = None,
          socket_nodes: str | Sequence[int] | None = None,
          train_args: Sequence[str] = (), plots: bool = True, resume: bool = False,
          command: str | None = None) -> Report:
    """Run the benchmark matrix (single GPU / DataParallel / DDP, the data pipelines, 1..N GPUs; CPU processes on
    a host without GPUs) and write report.md, report.json and the plots into ``output``, as ``ddpctl bench``
    does with the same options (``ddpctl bench --help`` explains each; lists may be given as lists).
    ``resume=True`` continues the report already in ``output`` (``ddpctl bench --resume DIR``): the same options
    are checked, its measured runs kept.

    Example::

        >>> report = ddpctl.bench("bench-out", workloads=["toy"], strategies=["single", "ddp"], gpus=[1, 2],
        ...                       steps=5, probe=False, plots=False)
        >>> report.ok, len(report.cells)
        (True, 2)

    Raises :class:`ddpctl.BadInput` for a bad option (nothing runs). A run that fails is in ``report.failed``
    (``ddpctl bench`` exits 1 then), not an exception.
    """
    from ddpctl.bench import run_bench
    from ddpctl.bench.option_lists import parse_counts, parse_list
    from ddpctl.bench.plan import PIPELINE_ALIASES, BenchOptions
    from ddpctl.bench.plots import available
    from ddpctl.spec import parse_size

    out = Path(output)
    if resume and not out.is_dir():
        raise UsageError(f"--resume {out}: no such directory", "pass the -o directory of an earlier ddpctl bench")
    probe_bytes = None
    if probe_max is not None:
        probe_bytes = parse_size(probe_max, lambda problem: UsageError(f"--probe-max: {problem}",
                                                                        "pass e.g. --probe-max 256m"))
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out} exists and is not a directory", "pass a directory path")
    if isinstance(train_args, str) or not all(isinstance(a, str) for a in train_args):
        raise UsageError("train_args= must be a list of strings", "pass e.g. train_args=['--compile']")
    pipeline_text = _names(pipelines, "pipelines")
    options = BenchOptions(
        workloads=parse_list(_names(workloads, "workloads"), what="workloads"),
        strategies=parse_list(_names(strategies, "strategies"), what="strategies"),
        gpus=parse_counts(_names(gpus, "gpus")),  # type: ignore[arg-type]
        pipelines=parse_list(pipeline_text, what="pipelines"),
        warmup=warmup, steps=steps, repeat=repeat, batch_size=batch_size, runtime=runtime,
        probe=probe, probe_max_bytes=probe_bytes, cell_timeout_s=cell_timeout, time_budget_s=time_budget,
        extra_args=tuple(train_args), image=image, links=parse_list(_names(links, "links"), what="links"),
        socket_nodes=parse_counts(_names(socket_nodes, "socket_nodes"), what="socket_nodes", example="2,4"),
    )
    deprecated = dict.fromkeys(p for p in parse_list(pipeline_text, what="pipelines") or () if p in PIPELINE_ALIASES)
    drawn = plots and available()
    data, written = run_bench(options, out, command=command or "ddpctl.bench()", python=python, plots=drawn,
                              resume=resume)
    # a run the time budget cut is skipped (listed in the report); a crashed or hung one failed
    failed = [r for c in data["cells"] for r in c["runs"] if not r["ok"] and not r.get("skipped")]
    skipped = [r for c in data["cells"] for r in c["runs"] if r.get("skipped")]
    for p in data["interconnect"]:
        if not p["ok"] and str(p.get("error")).startswith("skipped:"):
            skipped.append(p)
        elif not p["ok"]:
            failed.append(p)
    notes = []
    if plots and not drawn:
        notes.append("bench: matplotlib is not installed, so no plots (pip install 'ddpctl[bench]')")
    for old in deprecated:
        notes.append(f"warning: --pipelines {old} is deprecated and goes in the next release: use "
                     f"{PIPELINE_ALIASES[old]} (the same pipeline, named as ddp-train's --data-pipeline)")
    return Report(out, data, tuple(written), tuple(failed), tuple(skipped), tuple(notes))


__all__ = ["Report", "bench"]
