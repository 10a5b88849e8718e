"""``ddpctl plot``: loss and samples/s against step, one line per rank, restarts marked, jobs side by side.
matplotlib (the ``bench`` extra) is imported here only."""

from __future__ import annotations

import io
from pathlib import Path

from ddpctl import outfiles
from ddpctl.errors import UsageError
from ddpctl.joboutput import records as rec_mod
from ddpctl.joboutput.visible import visible
from ddpctl.watch.status import JobView


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("ddpctl plot needs matplotlib, which is not installed",
                         "install the bench extra: pip install 'ddpctl[bench]'") from None
    return plt


MAX_RANKS = 64  # ranks drawn per job: the lowest ones (the records of more are left out, and that is said)


def draw(views: list[JobView], output: Path) -> list[str]:
    """Write the PNG; returns the notes to print (records that failed their schema, ranks left out)."""
    data, notes = [], []
    for v in views:
        found = rec_mod.collect_all(v.lines)
        ranks = found.ranks
        if not ranks:
            raise UsageError(f"{visible(v.job)}: no progress records to plot",
                             "plot a job whose program writes them (ddp-train does; see ddp_train.progress)")
        if found.rejected:
            notes.append(f"{v.job}: {found.note()}")
        if len(ranks) > MAX_RANKS:
            notes.append(f"{v.job}: drew ranks {min(ranks)} to {sorted(ranks)[MAX_RANKS - 1]} of {len(ranks)} ranks "
                         f"with records (at most {MAX_RANKS})")
            ranks = {r: ranks[r] for r in sorted(ranks)[:MAX_RANKS]}
        data.append((v, ranks))
    if output.suffix.lower() != ".png":
        raise UsageError(f"--output {output} is not a .png file", "pass e.g. -o progress.png")
    plt = _pyplot()
    cols = len(data)
    fig, axes = plt.subplots(2, cols, figsize=(5.2 * cols, 6.4), squeeze=False, sharex="col")
    for c, (view, ranks) in enumerate(data):
        loss_ax, rate_ax = axes[0][c], axes[1][c]
        restarts: dict[int, int] = {}  # restart number -> first step it reported
        for rank in sorted(ranks):
            recs = ranks[rank].records
            runs: dict[int, list[dict]] = {}
            for r in recs:
                runs.setdefault(r.get("restart", 0) or 0, []).append(r)
                restarts[r.get("restart", 0) or 0] = min(restarts.get(r.get("restart", 0) or 0, r["step"]), r["step"])
            color = f"C{rank % 10}"
            for i, (_, part) in enumerate(sorted(runs.items())):
                label = f"rank {rank}" if i == 0 else None
                steps = [r["step"] for r in part]
                loss = [(s, r["loss"]) for s, r in zip(steps, part, strict=True) if r.get("loss") is not None]
                rate = [(s, r["samples_per_sec"]) for s, r in zip(steps, part, strict=True)
                        if r.get("samples_per_sec") is not None]
                if loss:
                    loss_ax.plot(*zip(*loss, strict=True), color=color, lw=1.2, marker=".", ms=3, label=label)
                if rate:
                    rate_ax.plot(*zip(*rate, strict=True), color=color, lw=1.2, marker=".", ms=3, label=label)
        for n, step in sorted(restarts.items())[:MAX_RANKS]:  # as many restart marks as ranks, at most
            if n == 0:
                continue
            for ax in (loss_ax, rate_ax):
                ax.axvline(step, color="0.4", ls="--", lw=1)
            loss_ax.annotate(f"restart {n}", (step, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                             textcoords="offset points", fontsize=8, color="0.3")
        loss_ax.set_title(plain_text(view.job + (f" ({view.result})" if view.result else "")), fontsize=10)
        loss_ax.set_ylabel("loss")
        rate_ax.set_ylabel("samples/s")
        rate_ax.set_xlabel("step")
        for ax in (loss_ax, rate_ax):
            ax.grid(alpha=0.3)
        if len(ranks) <= 16:
            loss_ax.legend(fontsize=7, loc="upper right")
    import warnings

    png = io.BytesIO()
    try:
        with warnings.catch_warnings():  # a job's title in a script the font lacks: drawn as boxes, not a warning
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            fig.tight_layout()
            fig.savefig(png, format="png", dpi=110)
    finally:
        plt.close(fig)
    outfiles.write_files({output: png.getvalue()})  # the -o rules: no link, no device, all or nothing
    return notes


def plain_text(text: str) -> str:
    """A job-provided title as matplotlib should draw it: control characters visible, ``$`` not math."""
    return visible(text).replace("$", "\\$")
