"""Where a training step's time goes on the GPU, from the traces of `ddp-train --profile-dir DIR`.

    python benchmarks/trace_breakdown.py DIR [--json out.json]

For each rank's trace (DIR/trace-rank<R>.json.gz, torch.profiler's Chrome trace) the GPU activity (kernels,
memcpy, memset) is cut into steps: in graph mode one step is everything one ``cudaGraphLaunch`` ran (the
kernels of a replay carry the launch's correlation id); in eager mode the profiled window is one interval
shared by its steps. Per step:

- ``span``: first activity to last activity of the step;
- ``compute``: time some non-NCCL kernel (or copy) ran (union of intervals, any stream);
- ``nccl``: time some NCCL kernel ran; ``nccl_exposed``: the part of it with no other kernel running (the
  step waits for communication, or for the slowest rank: an NCCL kernel also spins while its peers arrive);
  ``nccl_hidden``: the part overlapped with compute;
- ``idle``: span minus time anything ran; ``gap``: from the end of this step to the start of the next (the
  host's launch, the input copy, a straggler);
- ``nccl_kernels``: NCCL kernels per step, and for the median step where each started (ms after the step's
  first kernel) and how long it ran: buckets launched during the backward start before the step's end.

Rank lines side by side show a straggler (more compute on one rank) against waiting (more exposed NCCL on the
others). Prints a table; --json writes every figure.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
import statistics
import sys

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _union(intervals):
    """Merged, sorted [(start, end)]."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(iv):
    return sum(b - a for a, b in iv)


def _minus(a, b):
    """Length of the union ``a`` not covered by the union ``b`` (both merged and sorted)."""
    total, j = 0.0, 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                total += b[k][0] - cur
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            total += e - cur
    return total


def is_nccl(name: str) -> bool:
    return "nccl" in name.lower()


def breakdown(events) -> dict:
    """The per-step figures of one rank's trace (times in ms)."""
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS and "dur" in e]
    if not gpu:
        return {"error": "no GPU activity in the trace (a CPU run, or CUDA activities not recorded)"}
    launches = sorted((e["ts"], e.get("args", {}).get("correlation")) for e in events
                      if e.get("name") == "cudaGraphLaunch")
    groups = []
    if launches:
        by_corr = {c: [] for _, c in launches}
        for e in gpu:
            c = e.get("args", {}).get("correlation")
            if c in by_corr:
                by_corr[c].append(e)
        groups = [by_corr[c] for _, c in launches if by_corr[c]]
    mode = "graph" if groups else "window"
    if not groups:
        groups = [gpu]
    steps = []
    for g in groups:
        t0 = min(e["ts"] for e in g)
        t1 = max(e["ts"] + e["dur"] for e in g)
        comp = _union([(e["ts"], e["ts"] + e["dur"]) for e in g if not is_nccl(e["name"])])
        comm = _union([(e["ts"], e["ts"] + e["dur"]) for e in g if is_nccl(e["name"])])
        busy = _union(comp + comm)
        exposed = _minus(comm, comp)
        steps.append({
            "t0": t0, "t1": t1, "span": (t1 - t0) / 1e3, "compute": _length(comp) / 1e3,
            "nccl": _length(comm) / 1e3, "nccl_exposed": exposed / 1e3, "nccl_hidden": (_length(comm) - exposed) / 1e3,
            "idle": ((t1 - t0) - _length(busy)) / 1e3,
            "nccl_kernels": sorted(((e["ts"] - t0) / 1e3, e["dur"] / 1e3, e["name"][:60]) for e in g
                                   if is_nccl(e["name"])),
        })
    for a, b in zip(steps, steps[1:], strict=False):
        a["gap"] = (b["t0"] - a["t1"]) / 1e3
    keys = ("span", "compute", "nccl", "nccl_exposed", "nccl_hidden", "idle", "gap")
    med = {k: statistics.median([s[k] for s in steps if k in s]) for k in keys if any(k in s for s in steps)}
    per_step = med["span"] + med.get("gap", 0.0)
    mid = sorted(steps, key=lambda s: s["span"])[len(steps) // 2]
    return {"mode": mode, "steps": len(steps), "median_ms": {k: round(v, 4) for k, v in med.items()},
            "step_period_ms": round(per_step, 4), "nccl_kernels_per_step": len(mid["nccl_kernels"]),
            "median_step_nccl_kernels": [(round(s, 4), round(d, 4), n) for s, d, n in mid["nccl_kernels"]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", help="--profile-dir folders (each holds trace-rank<R>.json.gz)")
    ap.add_argument("--json", default=None, help="write every figure here")
    a = ap.parse_args(argv)
    out = {}
    for d in a.dirs:
        paths = sorted(glob.glob(os.path.join(d, "trace-rank*.json*")),
                       key=lambda p: int(re.search(r"rank(\d+)", p).group(1)))
        if not paths:
            print(f"trace_breakdown: no trace-rank*.json(.gz) in {d}", file=sys.stderr)
            return 2
        for p in paths:
            rank = re.search(r"rank(\d+)", p).group(1)
            out[f"{os.path.basename(os.path.normpath(d))}/rank{rank}"] = breakdown(_load(p))
    print("| trace | mode | steps | span ms | gap ms | compute ms | NCCL ms | NCCL exposed | NCCL hidden | idle ms "
          "| NCCL kernels/step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k, r in out.items():
        if "error" in r:
            print(f"| {k} | {r['error']} |")
            continue
        m = r["median_ms"]
        print(f"| {k} | {r['mode']} | {r['steps']} | {m['span']:.3f} | {m.get('gap', float('nan')):.3f} | "
              f"{m['compute']:.3f} | {m['nccl']:.3f} | {m['nccl_exposed']:.3f} | {m['nccl_hidden']:.3f} | "
              f"{m['idle']:.3f} | {r['nccl_kernels_per_step']} |")
    for k, r in out.items():
        if r.get("median_step_nccl_kernels"):
            where = ", ".join(f"{s:.3f}+{d:.3f}" for s, d, _ in r["median_step_nccl_kernels"])
            print(f"{k}: NCCL kernels of the median step (start ms after its first kernel + duration): {where}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
