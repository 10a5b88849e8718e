"""PNG plots of a report (matplotlib, the optional extra ``bench``; Agg backend, no display needed).

Every figure has the same fixed pixel size, :data:`SIZE_PX`, so a report's images line up (and tests can
check them). Without matplotlib no plot is made and the report says so.
"""

from __future__ import annotations

from pathlib import Path

SIZE_PX = (960, 600)
DPI = 100


def _legend(ax, **kw) -> None:
    """A legend when the axes hold a labelled line (a matrix of 1-GPU cells only has none: no empty legend and
    no matplotlib warning on the user's terminal)."""
    if ax.get_legend_handles_labels()[1]:
        ax.legend(**kw)


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _series(report: dict) -> dict[tuple[str, str, str], list[dict]]:
    """(workload, pipeline, strategy) -> ok cells sorted by GPU count."""
    out: dict[tuple[str, str, str], list[dict]] = {}
    for c in report["cells"]:
        if c["ok"]:
            strat = c["strategy"] + ("-socket" if c.get("link") == "socket" else "")  # two-node emulation
            out.setdefault((c["workload"], c["pipeline"], strat), []).append(c)
    for v in out.values():
        v.sort(key=lambda c: c["gpus"])
    return out


def make_plots(report: dict, outdir: Path) -> list[str]:
    if not available():
        return []
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from ddpctl.bench.plan import PIPELINES

    unit = "GPUs" if report["plan"]["device"] == "cuda" else "processes (CPU)"
    series = _series(report)
    workloads = list(dict.fromkeys(c["workload"] for c in report["cells"]))
    made = []
    size = (SIZE_PX[0] / DPI, SIZE_PX[1] / DPI)

    def save(fig, name: str) -> None:
        fig.savefig(outdir / name, dpi=DPI)  # no bbox_inches="tight": it would change the pixel size
        plt.close(fig)
        made.append(name)

    # 1. throughput vs GPUs, one panel per workload, with the ideal line N x 1-GPU.
    fig, axes = plt.subplots(1, max(1, len(workloads)), figsize=size, squeeze=False)
    for ax, w in zip(axes[0], workloads, strict=False):
        ideal_drawn = set()
        for (wl, pipe, strat), cells in series.items():
            if wl != w or strat == "single":
                continue
            base = _baseline(report, wl, pipe)
            lead = bool(base) and cells[0]["gpus"] != 1  # start the line at the 1-GPU baseline
            xs = ([1] if lead else []) + [c["gpus"] for c in cells]
            ys = ([base] if lead else []) + [c["images_per_sec"]["median"] for c in cells]
            ax.plot(xs, ys, marker="o", label=f"{strat} ({pipe})")
            if base and pipe not in ideal_drawn:
                top = max(report["plan"]["gpu_counts"])
                ax.plot([1, top], [base, base * top], linestyle="--", color="grey", linewidth=1,
                        label=f"ideal ({pipe})")
                ideal_drawn.add(pipe)
        ax.set_title(w, fontsize=10)
        ax.set_xlabel(unit)
        ax.set_ylabel("images / s")
        ax.set_ylim(bottom=0)
        ax.set_xticks(report["plan"]["gpu_counts"])
        ax.grid(alpha=0.3)
        _legend(ax, fontsize=7)
    fig.suptitle("Throughput vs " + unit)
    fig.tight_layout()
    save(fig, "throughput_vs_gpus.png")

    # 2. scaling efficiency vs GPUs, with the interconnect's bounds for DDP.
    fig, ax = plt.subplots(figsize=size)
    top = 1.0
    for (wl, pipe, strat), cells in series.items():
        pts = [(c["gpus"], c["scaling_efficiency"]) for c in cells if c["scaling_efficiency"] is not None]
        if strat == "single" or not pts:
            continue
        if pts[0][0] != 1:
            pts.insert(0, (1, 1.0))  # the 1-GPU baseline, by definition
        top = max(top, max(p[1] for p in pts))
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{wl} {pipe} {strat}")
        bounds = [(c["gpus"], c["interconnect"]) for c in cells if c.get("interconnect")]
        if bounds:
            ax.plot([b[0] for b in bounds], [b[1]["eff_no_overlap"] for b in bounds], marker="v", linestyle=":",
                    color=line.get_color(), label=f"{wl} {pipe}: interconnect bound, no overlap")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="ideal")
    ax.set_xlabel(unit)
    ax.set_ylabel("img/s(N) / (N x img/s(1))")
    ax.set_xticks(report["plan"]["gpu_counts"])
    ax.set_ylim(0, max(1.1, top + 0.05))
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=7, loc="lower left")
    ax.set_title("Scaling efficiency vs " + unit)
    fig.tight_layout()
    save(fig, "efficiency_vs_gpus.png")

    # 3. per-strategy bars at each workload/pipeline: single (1) vs dp / ddp at the largest count.
    fig, ax = plt.subplots(figsize=size)
    groups = [(w, p) for w in workloads for p in PIPELINES
              if any(k[0] == w and k[1] == p for k in series)]
    strategies = [s for s in ("single", "dp", "ddp") if any(k[2] == s for k in series)]
    width = 0.8 / max(1, len(strategies))
    for i, strat in enumerate(strategies):
        xs, ys, labels = [], [], []
        for g, (w, p) in enumerate(groups):
            cells = series.get((w, p, strat))
            if not cells:
                continue
            c = cells[-1]
            xs.append(g + i * width)
            ys.append(c["images_per_sec"]["median"])
            labels.append(f"x{c['gpus']}")
        bars = ax.bar(xs, ys, width=width, label=strat)
        for b, lab in zip(bars, labels, strict=False):
            ax.annotate(lab, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=7)
    ax.set_xticks([g + width * (len(strategies) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{w}\n{p}" for w, p in groups], fontsize=8)
    ax.set_ylabel("images / s")
    ax.set_title("Strategies (largest count each)")
    ax.grid(axis="y", alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    save(fig, "strategies.png")

    # 4. the scaling forecast: N nodes x G GPUs per link, the largest G of the grid, and the validated cells.
    fc = report.get("forecast") or {}
    fc_workloads = [w["workload"] for w in fc.get("workloads") or []]
    if fc_workloads:
        fig, axes = plt.subplots(1, len(fc_workloads), figsize=size, squeeze=False)
        for ax, w in zip(axes[0], fc_workloads, strict=True):
            rows = [r for r in fc["rows"] if r["workload"] == w]
            g = max(r["gpus_per_node"] for r in rows)
            one = next((r for r in rows if r["nodes"] == 1 and r["gpus_per_node"] == g), None)
            for link in dict.fromkeys(r["link"] for r in rows if r["nodes"] > 1):
                pts = ([(one["gpus"], one["scaling_efficiency"])] if one else []) + [
                    (r["gpus"], r["scaling_efficiency"]) for r in rows if r["link"] == link and r["gpus_per_node"] == g]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                        label="measured link (sockets)" if link == "measured" else link)
            val = [v for v in fc.get("validation") or [] if v["modelled"] and v["key"].startswith(w + "/")
                   and v["measured_efficiency"] is not None]
            if val:
                ax.scatter([v["gpus"] for v in val], [v["measured_efficiency"] for v in val], color="black", marker="o",
                           zorder=3, label="cells as measured")
                ax.scatter([v["gpus"] for v in val], [v["forecast_efficiency"] for v in val], facecolors="none",
                           edgecolors="red", marker="s", zorder=3, label="forecast without it")
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{w} ({g} per node)", fontsize=10)
            ax.set_xlabel(unit + " (nodes x per node)")
            ax.set_ylabel("forecast scaling efficiency")
            ax.grid(alpha=0.3)
            _legend(ax, fontsize=7, loc="lower left")
        fig.suptitle("Scaling forecast over named links")
        fig.tight_layout()
        save(fig, "forecast.png")
    return made


def _baseline(report: dict, workload: str, pipeline: str) -> float | None:
    """The 1-GPU img/s the cells of this workload and pipeline are measured against (the report's baseline_key:
    the fastest 1-GPU configuration)."""
    index = {c["key"]: c for c in report["cells"] if c["ok"]}
    for c in report["cells"]:
        if (c["workload"], c["pipeline"]) == (workload, pipeline) and c.get("baseline_key") in index:
            return index[c["baseline_key"]]["images_per_sec"]["median"]
    return None
