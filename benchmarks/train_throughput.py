"""ddp-train throughput: variants of one workload side by side, at 1..N GPUs, with scaling and spread.

Every run is a real `ddp-train` process (torchrun for several GPUs) with warm-up steps (excluded from its figures)
and timed steps; the figures come from rank 0's summary line. A variant is a name and ddp-train flags, optionally
preceded by environment assignments (``NAME=VALUE`` words in capitals, e.g. NCCL settings), and run at every
``--gpus`` count or at its own (``NAME@4=...``):

    python benchmarks/train_throughput.py --workload r18 --gpus 1,4 \\
        --variant base= --variant bf16='--grad-compression bf16' \\
        --variant bk-ch4@4='NCCL_MAX_NCHANNELS=4 --graph-reducer bucketed' --repeats 2 --out t.json
    python benchmarks/train_throughput.py --workload r18 --gpus 1,2 --variant graph='--step-mode graph' \\
        --variant eager='--step-mode eager' --progress-overhead --repeats 3 --out progress_overhead.json

Runs are interleaved (repeat 1 of every variant and GPU count, then repeat 2, ...), so a drift of the machine
spreads over all of them. Scaling at k GPUs is k-GPU img/s over k x the fastest 1-GPU median of the same call
(never a slowed 1-GPU run). ``--progress-overhead`` runs each variant with a log line and a progress record every
``--log-interval`` steps, and the same with ``--progress-records off``, alternating which goes first; it reports
the median of each and on / off (target: within 1 %).

Workloads (batch 256 per GPU, no evaluation, no sync check): ``r18`` (CIFAR-10 ResNet-18, ddp-train's GPU-resident
input pipeline), ``r50`` (ImageNet-synthetic ResNet-50, 224 px), ``classic`` (the reference input pipeline: torchvision ResNet-18,
PIL transforms in 4 DataLoader workers, fp32, eager). ``ddpctl bench`` is the standard report; this tool is for
looking at one workload's variants in detail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import benchlib  # noqa: E402

benchlib.use_src()
COMMON = ["--batch-size", "256", "--no-eval", "--sync-check", "off", "--quiet"]
WORKLOADS = {  # name: (ddp-train flags, warm-up steps, timed steps)
    "r18": (["--workload", "cifar10", "--model", "resnet18", *COMMON], 40, 400),
    "r50": (["--workload", "imagenet-synthetic", "--model", "resnet50", "--test-size", "256", *COMMON], 20, 60),
    "classic": (["--workload", "cifar10", "--model", "torchvision-resnet18", *COMMON, "--data-pipeline", "classic",
                 "--workers", "4", "--precision", "fp32", "--no-channels-last", "--no-cudnn-benchmark",
                 "--step-mode", "eager"], 20, 120),
}
ENV_WORD = re.compile(r"^[A-Z][A-Z0-9_]*=")


def parse_variant(text: str) -> tuple[str, dict, list[str], list[int] | None]:
    """'name[@GPUS]=[ENV=V ...] flags' -> (name, env, flags, GPU counts or None for --gpus)."""
    head, sep, rest = text.partition("=")
    name, _, counts = head.partition("@")
    try:
        gpus = [int(x) for x in counts.split(",")] if counts else None
    except ValueError:
        gpus = []
    if not sep or not name or gpus == []:
        raise SystemExit(f"error: --variant {text!r}: write NAME[@GPUS]=FLAGS, e.g. base= or bf16@4='--grad-compression bf16'")
    words = shlex.split(rest)
    env = {}
    while words and ENV_WORD.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return name, env, words, gpus


def command(gpus: int, flags: list[str], warmup: int, steps: int, log_interval: int) -> list[str]:
    # --epochs is set high so that --max-steps, not the end of the (one-epoch default) run, ends the window
    base = ["-m", "ddp_train", *flags, "--epochs", "1000", "--warmup-steps", str(warmup),
            "--max-steps", str(warmup + steps), "--log-interval", str(log_interval)]
    if gpus == 1:
        return [sys.executable, *base, "--strategy", "single"]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus), *base]


def summary_of(log: Path) -> dict | None:
    """Rank 0's summary: the last JSON line whose event is the summary (progress records are skipped)."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        brace = line.find("{")
        if brace >= 0 and line.endswith("}") and '"event":"progress"' not in line.replace(" ", ""):
            try:
                data = json.loads(line[brace:])
            except ValueError:
                continue
            if isinstance(data, dict) and "images_per_sec" in data:
                return data
    return None


def run_one(a, name: str, gpus: int, env: dict, flags: list[str], tag: str) -> dict:
    base, warmup, steps = WORKLOADS[a.workload]
    argv = command(gpus, [*base, *a.extra.split(), *flags], a.warmup or warmup, a.steps or steps, a.log_interval)
    log = a.logs / f"{name}-{gpus}-{tag}.log"
    t0 = time.monotonic()
    rc = benchlib.run(argv, log=log, timeout=a.timeout, env=benchlib.gpu_env(env))
    s = summary_of(log) if log.exists() else None
    ips = (s or {}).get("images_per_sec")
    res = {"variant": name, "gpus": gpus, "tag": tag, "rc": rc, "wall_s": round(time.monotonic() - t0, 1),
           "env": env, "cmd": " ".join(["python"] + argv[1:]), "images_per_sec": ips,
           "step_ms": round(s["step_time_s"] * 1e3, 3) if s and s.get("step_time_s") else None,
           "summary": s}
    if rc != 0 or not ips:
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        res["error"] = f"exit {rc}; log {log}: {tail}"
    print(f"{name:16s} gpus={gpus} {tag:8s} img/s={ips} step_ms={res['step_ms']} "
          f"reducer={(s or {}).get('graph_reducer')} mode={(s or {}).get('step_mode')} wall={res['wall_s']}"
          f"{'  ' + res['error'][-300:] if res.get('error') else ''}", flush=True)
    return res


def spread(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    return round(100 * (max(values) - min(values)) / statistics.median(values), 2)


def throughput(a, variants) -> dict:
    runs = []
    for rep in range(a.repeats):
        for name, env, flags, counts in variants:
            for gpus in counts or a.gpus:
                runs.append(run_one(a, name, gpus, env, flags, f"r{rep + 1}"))
    rows = []
    for name, env, flags, counts in variants:
        for gpus in counts or a.gpus:
            v = [r["images_per_sec"] for r in runs if r["variant"] == name and r["gpus"] == gpus and r["images_per_sec"]]
            rows.append({"variant": name, "gpus": gpus, "env": env, "flags": flags, "runs": v,
                         "median": statistics.median(v) if v else None, "spread_pct": spread(v)})
    ones = [r for r in rows if r["gpus"] == 1 and r["median"]]
    best1 = max(ones, key=lambda r: r["median"]) if ones else None
    for r in rows:
        r["scaling"] = (round(r["median"] / (r["gpus"] * best1["median"]), 4)
                        if best1 and r["median"] and r["gpus"] > 1 else None)
    print(f"\nworkload {a.workload}; scaling against the fastest 1-GPU variant: "
          f"{best1['variant'] if best1 else None} ({best1['median'] if best1 else None} img/s)")
    print("| variant | GPUs | img/s (median) | runs | spread % | scaling |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['gpus']} | {r['median']} | {len(r['runs'])} | {r['spread_pct']} | {r['scaling']} |")
    return {"rows": rows, "best_1gpu": best1 and {"variant": best1["variant"], "median": best1["median"]}, "runs": runs}


def progress_overhead(a, variants) -> dict:
    runs, rows = [], []
    for name, env, flags, counts in variants:
        for gpus in counts or a.gpus:
            got = {"on": [], "off": []}
            for rep in range(a.repeats):
                for mode in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    extra = [] if mode == "on" else ["--progress-records", "off"]
                    r = run_one(a, name, gpus, env, [*flags, *extra], f"{mode}{rep + 1}")
                    runs.append(r)
                    if r["images_per_sec"]:
                        got[mode].append(r["images_per_sec"])
            on = statistics.median(got["on"]) if got["on"] else None
            off = statistics.median(got["off"]) if got["off"] else None
            rows.append({"variant": name, "gpus": gpus, "log_interval": a.log_interval, **got, "median_on": on,
                         "median_off": off, "ratio": round(on / off, 4) if on and off else None})
    print("\n| variant | GPUs | log interval | img/s records on | img/s records off | on / off |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['gpus']} | {r['log_interval']} | {r['median_on']} | {r['median_off']} | {r['ratio']} |")
    return {"progress_overhead": rows, "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="r18")
    ap.add_argument("--gpus", default="1,2", help="comma-separated GPU counts (default 1,2)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=[ENV=V ...] FLAGS",
                    help="a variant to run (repeatable; default: base=, ddp-train's defaults)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each variant and GPU count (default 2)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: the workload's)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default: the workload's)")
    ap.add_argument("--extra", default="", help="ddp-train flags for every run (a CPU smoke test: "
                    "'--device cpu --model toy-cnn --train-size 1024 --batch-size 32')")
    ap.add_argument("--log-interval", type=int, default=None,
                    help="steps between log lines (default: 10 with --progress-overhead, else one line at the end)")
    ap.add_argument("--progress-overhead", action="store_true", help="progress records on vs off (see above)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per run (default 240)")
    ap.add_argument("--out", type=Path, default=Path("train_throughput.json"))
    ap.add_argument("--logs", type=Path, default=None, help="folder for the run logs (default: beside --out)")
    a = ap.parse_args()
    try:
        a.gpus = [int(x) for x in a.gpus.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--gpus {a.gpus!r}: write GPU counts such as 1,2,4")
    if a.log_interval is None:
        a.log_interval = 10 if a.progress_overhead else 1_000_000
    a.logs = a.logs or a.out.parent / (a.out.stem + "-logs")
    a.logs.mkdir(parents=True, exist_ok=True)
    variants = [parse_variant(v) for v in (a.variant or ["base="])]
    doc = {"workload": a.workload, "argv": sys.argv[1:], "host": os.uname().nodename}
    doc.update(progress_overhead(a, variants) if a.progress_overhead else throughput(a, variants))
    first = next((r["summary"] for r in doc["runs"] if r.get("summary")), None) or {}
    doc["device"] = first.get("device_name")
    a.out.write_text(json.dumps(doc, indent=1))
    return 0 if all(r["images_per_sec"] for r in doc["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
