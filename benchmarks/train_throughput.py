"""ddp-train throughput: the device pipeline (data on the GPU) vs the dataloader pipeline, and DDP scaling.

Every configuration is a real `ddp-train` run (a subprocess; torchrun for several GPUs) with a fixed
number of warm-up steps (excluded) and timed steps; the figures come from each run's summary line.

    python benchmarks/train_throughput.py --out results.json            # on a machine with 1-2 GPUs
    python benchmarks/train_throughput.py --only r18-device-1 --scale 0.2  # a quick subset
    python benchmarks/train_throughput.py --progress-overhead --only r18-graph-1,r18-graph-2 --repeats 3 \
        --out progress_overhead.json   # progress records on vs off (target: within 1 %)

--progress-overhead runs each configuration with a log line and progress record every --log-interval steps
(default 10), and the same with --progress-records off, alternating which goes first, --repeats times; it prints
the median samples/s of each and their ratio.

Targets: the device pipeline >= 4x the dataloader pipeline on 1 GPU (ResNet-18 CIFAR, batch 256/GPU);
scaling >= 0.95 on 2 GPUs; ResNet-50 synthetic 224 bf16 >= 2,800 img/s per GPU and >= 0.97 scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

R18 = ["--workload", "cifar10", "--model", "resnet18", "--batch-size", "256", "--no-eval", "--sync-check", "off",
       "--quiet"]
R50 = ["--workload", "imagenet-synthetic", "--model", "resnet50", "--batch-size", "256", "--no-eval",
       "--sync-check", "off", "--quiet", "--test-size", "256"]
DATALOADER = ["--data-pipeline", "dataloader", "--workers", "4", "--precision", "fp32", "--no-channels-last"]

# name: (gpus, args, warmup steps, timed steps)
CONFIGS = {
    "r18-device-1": (1, R18, 40, 300),
    "r18-dataloader-1": (1, R18 + DATALOADER, 20, 120),
    "r18-dataloader-bf16-1": (1, R18 + ["--data-pipeline", "dataloader", "--workers", "4"], 20, 120),
    "r18-device-2": (2, R18, 40, 300),
    "r50-device-1": (1, R50, 15, 60),
    "r50-device-2": (2, R50, 15, 60),
    "r18-compile-1": (1, R18 + ["--compile"], 60, 300),
    "r18-compile-2": (2, R18 + ["--compile"], 60, 300),
    "r18-cg-1": (1, R18 + ["--compile", "--compile-mode", "reduce-overhead"], 60, 300),
    "r18-cg-2": (2, R18 + ["--compile", "--compile-mode", "reduce-overhead", "--static-graph"], 60, 300),
    "r18-static-2": (2, R18 + ["--static-graph"], 40, 300),
    "r18-nobb-2": (2, R18 + ["--no-broadcast-buffers"], 40, 300),
    "r18-bf16c-2": (2, R18 + ["--grad-compression", "bf16"], 40, 300),
    "r18-nobb-bf16c-2": (2, R18 + ["--no-broadcast-buffers", "--grad-compression", "bf16"], 40, 300),
    "r18-cg-nobb-2": (2, R18 + ["--compile", "--compile-mode", "reduce-overhead", "--no-broadcast-buffers"], 60, 300),
}
# the whole-step CUDA graph (--step-mode graph), with and without torch.compile, against eager and the
# classic (seed-style) pipeline: torchvision ResNet-18, PIL per-sample transforms in 4 workers, fp32, eager
GRAPH = ["--step-mode", "graph"]
CLASSIC = ["--workload", "cifar10", "--model", "torchvision-resnet18", "--batch-size", "256", "--no-eval",
        "--sync-check", "off", "--quiet", *DATALOADER, "--no-cudnn-benchmark", "--step-mode", "eager",
        "--data-pipeline", "classic"]
# the classic cell before the seeds' torchvision-style dataset (ddp-train's seeded per-sample pipeline instead)
CLASSIC_OLD = CLASSIC[:-2]
BF16 = ["--grad-compression", "bf16"]
SKIP = ["--debug-skip-grad-sync"]  # diagnosis: no collective at all (the ranks drift apart)
for _n in (1, 2, 4, 8):
    CONFIGS[f"r18-eager-{_n}"] = (_n, R18 + ["--step-mode", "eager"], 40, 300)
    CONFIGS[f"r18-graph-{_n}"] = (_n, R18 + GRAPH, 40, 400)
    CONFIGS[f"r18-graphddp-{_n}"] = (_n, R18 + GRAPH + ["--graph-reducer", "ddp"], 40, 400)
    CONFIGS[f"r18-graphc-{_n}"] = (_n, R18 + GRAPH + ["--compile"], 40, 400)
    CONFIGS[f"r50-graph-{_n}"] = (_n, R50 + GRAPH, 20, 60)
    CONFIGS[f"r50-eager-{_n}"] = (_n, R50 + ["--step-mode", "eager"], 15, 60)
    CONFIGS[f"classic-{_n}"] = (_n, CLASSIC, 20, 120)
    CONFIGS[f"classicold-{_n}"] = (_n, CLASSIC_OLD, 20, 120)
    CONFIGS[f"r18-graphbf-{_n}"] = (_n, R18 + GRAPH + BF16, 40, 400)
    CONFIGS[f"r18-graphskip-{_n}"] = (_n, R18 + GRAPH + SKIP, 40, 400)
    CONFIGS[f"r18-graphcbf-{_n}"] = (_n, R18 + GRAPH + ["--compile"] + BF16, 40, 400)
    CONFIGS[f"r18-graph512-{_n}"] = (_n, R18 + GRAPH + ["--batch-size", "512"], 40, 300)
    CONFIGS[f"r18-graph512bf-{_n}"] = (_n, R18 + GRAPH + ["--batch-size", "512"] + BF16, 40, 300)
    # the bucketed reducer (bucket all-reduces overlapping the backward), 25 MiB and 8 MiB
    CONFIGS[f"r18-graphbk-{_n}"] = (_n, R18 + GRAPH + ["--graph-reducer", "bucketed"], 40, 400)
    CONFIGS[f"r18-graphbk8-{_n}"] = (_n, R18 + GRAPH + ["--graph-reducer", "bucketed", "--bucket-mb", "8"], 40, 400)
    CONFIGS[f"r18-graphcbk8-{_n}"] = (_n, R18 + GRAPH + ["--compile", "--graph-reducer", "bucketed", "--bucket-mb", "8"],
                                      40, 400)
    CONFIGS[f"r50-graphbk-{_n}"] = (_n, R50 + GRAPH + ["--graph-reducer", "bucketed"], 20, 60)
    CONFIGS[f"r50-graphbf-{_n}"] = (_n, R50 + GRAPH + BF16, 20, 60)
    CONFIGS[f"r50-graphddp-{_n}"] = (_n, R50 + GRAPH + ["--graph-reducer", "ddp"], 20, 60)
    CONFIGS[f"r50-graphskip-{_n}"] = (_n, R50 + GRAPH + SKIP, 20, 60)
    # what the per-step buffer broadcast costs (--no-broadcast-buffers), alone and bucketed
    CONFIGS[f"r18-graphnobb-{_n}"] = (_n, R18 + GRAPH + ["--no-broadcast-buffers"], 40, 400)
    CONFIGS[f"r18-graphbk8nobb-{_n}"] = (_n, R18 + GRAPH + ["--graph-reducer", "bucketed", "--bucket-mb", "8",
                                                          "--no-broadcast-buffers"], 40, 400)
    CONFIGS[f"r18-graphcbk-{_n}"] = (_n, R18 + GRAPH + ["--compile", "--graph-reducer", "bucketed"], 40, 400)
    CONFIGS[f"r18-graphcnobb-{_n}"] = (_n, R18 + GRAPH + ["--compile", "--no-broadcast-buffers"], 40, 400)
    # torch.compile block by block (--compile-scope blocks), so the bucketed reducer's hooks fire
    # per block and its all-reduces overlap the compiled backward; flat for the 1-GPU cost of the smaller regions
    CONFIGS[f"r18-graphcblk-{_n}"] = (_n, R18 + GRAPH + ["--compile", "--compile-scope", "blocks"], 40, 400)
    CONFIGS[f"r18-graphcbk8blk-{_n}"] = (_n, R18 + GRAPH + ["--compile", "--compile-scope", "blocks",
                                                          "--graph-reducer", "bucketed", "--bucket-mb", "8"], 40, 400)
DEFAULT = ["r18-device-1", "r18-dataloader-1", "r18-dataloader-bf16-1", "r18-device-2", "r50-device-1", "r50-device-2"]


def command(gpus, args, warmup, timed, log_interval=1000000):
    # --epochs is set high so that --max-steps, not the end of the (one-epoch default) run, ends the window
    base = ["-m", "ddp_train", *args, "--epochs", "1000", "--warmup-steps", str(warmup),
            "--max-steps", str(warmup + timed), "--log-interval", str(log_interval)]
    if gpus == 1:
        return [sys.executable, *base, "--strategy", "single"]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus), *base]


def run_one(name, scale, timeout, extra=(), warmup_override=None, log_interval=1000000):
    gpus, args, warmup, timed = CONFIGS[name]
    if warmup_override is not None:
        warmup = warmup_override
    cmd = command(gpus, [*args, *extra], warmup, max(5, int(timed * scale)), log_interval)
    t0 = time.monotonic()
    # its own process group, ended as a whole on timeout (killing torchrun alone would orphan its workers)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        return {"name": name, "gpus": gpus, "cmd": " ".join(cmd[1:]),
                "error": f"timeout after {timeout}s; stderr tail: {(err or '')[-2500:]}"}
    p = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    wall = round(time.monotonic() - t0, 1)
    res = {"name": name, "gpus": gpus, "cmd": " ".join(["python"] + cmd[1:]), "rc": p.returncode, "wall_s": wall}
    try:  # rank 0's summary: the last stdout line that is not another rank's progress record
        res["summary"] = json.loads([ln for ln in p.stdout.strip().splitlines() if '"event":"progress"' not in ln][-1])
    except (ValueError, IndexError):
        res["error"] = (p.stderr or p.stdout)[-1500:]
    return res


def progress_overhead(a) -> None:
    """Samples/s with progress records on vs off (the same log interval), alternating order, median of repeats."""
    import statistics

    rows = []
    for name in a.only.split(","):
        runs = {"on": [], "off": []}
        for rep in range(a.repeats):
            for mode in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                extra = a.extra.split() + (["--progress-records", "off"] if mode == "off" else [])
                r = run_one(name.strip(), a.scale, a.timeout, extra, a.warmup, a.log_interval)
                ips = (r.get("summary") or {}).get("images_per_sec")
                print(f"{name:20s} records {mode:3s} rep {rep + 1}: img/s={ips} {r.get('error', '')[-400:]}", flush=True)
                if ips:
                    runs[mode].append(ips)
        on = statistics.median(runs["on"]) if runs["on"] else None
        off = statistics.median(runs["off"]) if runs["off"] else None
        rows.append({"name": name, "log_interval": a.log_interval, "on": runs["on"], "off": runs["off"],
                     "median_on": on, "median_off": off, "ratio": round(on / off, 4) if on and off else None})
    with open(a.out, "w") as f:
        json.dump({"progress_overhead": rows}, f, indent=1)
    print("\n| config | log interval | img/s records on | img/s records off | on / off |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['log_interval']} | {r['median_on']} | {r['median_off']} | {r['ratio']} |")


def derive(results):
    by = {r["name"]: r.get("summary", {}).get("images_per_sec") for r in results}
    out = {}

    def ratio(a, b, div=1):
        return round(by[a] / (div * by[b]), 3) if by.get(a) and by.get(b) else None

    out["device_vs_dataloader_1gpu"] = ratio("r18-device-1", "r18-dataloader-1")
    out["device_vs_dataloader_bf16_1gpu"] = ratio("r18-device-1", "r18-dataloader-bf16-1")
    out["r18_scaling_2gpu"] = ratio("r18-device-2", "r18-device-1", 2)
    out["r18_compile_scaling_2gpu"] = ratio("r18-compile-2", "r18-compile-1", 2)
    out["r50_scaling_2gpu"] = ratio("r50-device-2", "r50-device-1", 2)
    # scaling against the fastest 1-GPU configuration measured in the same call (never a slowed one)
    ones = [n for n in by if n.startswith("r18-graph") and n.endswith("-1") and by[n]]
    best1 = max(ones, key=lambda n: by[n]) if ones else None
    for n in by:
        if n.startswith("r18-graphc") and not n.endswith("-1") and best1:
            k = int(n.rsplit("-", 1)[1])
            out[f"{n}_vs_best_1gpu"] = {"best_1gpu": best1, "scaling": ratio(n, best1, k)}
    out["r50_img_s_per_gpu_1"] = by.get("r50-device-1")
    out["r50_img_s_per_gpu_2"] = round(by["r50-device-2"] / 2, 1) if by.get("r50-device-2") else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(DEFAULT), help=f"comma-separated subset of {', '.join(CONFIGS)}")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the timed steps")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per configuration")
    ap.add_argument("--out", default="train_throughput.json")
    ap.add_argument("--extra", default="", help="extra ddp-train flags for every run (a CPU smoke test: "
                    "'--device cpu --model toy-cnn --train-size 1024 --batch-size 32')")
    ap.add_argument("--warmup", type=int, default=None, help="override the warm-up steps")
    ap.add_argument("--progress-overhead", action="store_true",
                    help="progress records on vs off for each --only configuration (see above)")
    ap.add_argument("--repeats", type=int, default=3, help="--progress-overhead: runs of each mode")
    ap.add_argument("--log-interval", type=int, default=10, help="--progress-overhead: steps between records")
    a = ap.parse_args()
    for name in (n.strip() for n in a.only.split(",")):
        if name not in CONFIGS:  # *-fast-N: the device pipeline's configurations before they took its name
            renamed = name.replace("-fast-", "-device-")
            ap.error(f"unknown configuration {name!r}" + (f": it is {renamed!r} now" if renamed in CONFIGS else
                                                         " (see --help for the list)"))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if a.progress_overhead:
        progress_overhead(a)
        return
    results = []
    for name in a.only.split(","):
        r = run_one(name.strip(), a.scale, a.timeout, a.extra.split(), a.warmup)
        results.append(r)
        s = r.get("summary", {})
        print(f"{name:24s} gpus={r['gpus']} img/s={s.get('images_per_sec')} step={s.get('step_time_s')} "
              f"data={s.get('data_time_s')} util={s.get('gpu_util')} mem={s.get('gpu_mem_gb')} "
              f"mode={s.get('step_mode')}{'+compile' if s.get('compile') else ''}"
              f"{'/' + s['compile_scope'] if s.get('compile_scope') == 'blocks' else ''} startup={s.get('startup_s')} "
              f"capture={s.get('capture_s')} reducer={s.get('graph_reducer')}/{s.get('graph_buckets')} "
              f"loss={s.get('train_loss')} wall={r.get('wall_s')} {r.get('error', '')[-600:]}", flush=True)
        doc = {"device": s.get("device_name") or (results[0].get("summary") or {}).get("device_name"),
               "results": results, "derived": derive(results)}
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    print()
    print("| config | GPUs | img/s (global) | img/s per GPU | step ms | data ms | GPU util % | GPU mem GB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        s = r.get("summary") or {}
        ips = s.get("images_per_sec")
        print(f"| {r['name']} | {r['gpus']} | {ips if ips else 'ERR'} | {round(ips / r['gpus'], 1) if ips else ''} | "
              f"{round(s['step_time_s'] * 1000, 2) if s.get('step_time_s') else ''} | "
              f"{round(s['data_time_s'] * 1000, 2) if s.get('data_time_s') is not None else ''} | "
              f"{s.get('gpu_util', '')} | {s.get('gpu_mem_gb', '')} |")
    print()
    print(json.dumps(derive(results), indent=1))


if __name__ == "__main__":
    main()
