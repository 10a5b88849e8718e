"""ddp-train's defaults on a long run: what a user gets from a real 200-epoch CIFAR recipe, not from a short
benchmark cell (a short run is rightly not compiled: the auto rule compiles only runs that repay the start-up).

Starts `python -m ddp_train --workload cifar10 --model resnet18 --batch-size 256 --epochs 200` (one process, or
torchrun with --gpus N; every other setting ddp-train's default), reads the first log line (the step mode and
whether torch.compile was picked, and why), follows the metrics file's step records for --seconds after the
first one, then stops the run with SIGTERM (ddp-train's stop control: every rank stops at one step boundary).
Reports the median images/s and GPU utilisation over the logged intervals after the first (the median keeps an
interval that holds an epoch's end and evaluation out of the figure) and the start-up: launch to the end of the
first logged interval (by the record's own clock; it includes that interval's ~20 steps, ~0.1 s).

    python benchmarks/default_long_run.py --gpus 1 --seconds 60 --out long1.json     # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to follow the run after its first step record")
    ap.add_argument("--epochs", type=int, default=200, help="the recipe's length (the auto rule reads it)")
    ap.add_argument("--extra", default="", help="more ddp-train flags (e.g. '--device cpu --workload toy' for a dry run)")
    ap.add_argument("--timeout", type=float, default=240.0, help="give up if no step record came by then")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ddp-long-")
    metrics = os.path.join(tmp, "metrics.jsonl")
    train = ["-m", "ddp_train", "--workload", "cifar10", "--model", "resnet18", "--batch-size", "256",
             "--epochs", str(a.epochs), "--metrics-file", metrics, *a.extra.split()]
    cmd = [sys.executable, *train] if a.gpus == 1 else \
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={a.gpus}", *train]
    log = open(os.path.join(tmp, "stdout.log"), "w+")
    t0, wall0 = time.monotonic(), time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    first_at, steps, seen = None, [], 0
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            if os.path.exists(metrics):
                with open(metrics) as f:
                    recs = [json.loads(x) for x in f.read().splitlines()[seen:] if x.strip()]
                seen += len(recs)
                for r in recs:
                    if r.get("event") == "step":
                        steps.append(r)
                        if first_at is None:
                            first_at = time.monotonic() - t0
            if first_at is None and time.monotonic() - t0 > a.timeout:
                break
            if first_at is not None and time.monotonic() - t0 > first_at + a.seconds:
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    log.seek(0)
    out = log.read()
    first_line = next((x for x in out.splitlines() if x.startswith("ddp-train: step:")), None)
    res = {"command": " ".join(cmd), "gpus": a.gpus, "epochs": a.epochs, "first_line": first_line,
           "exit_code": proc.returncode, "intervals": len(steps)}
    if steps:
        ips = [r["images_per_sec"] for r in steps[1:] or steps]
        util = [r["gpu_util"] for r in steps[1:] or steps if r.get("gpu_util") is not None]
        st = [r["step_time_s"] for r in steps[1:] or steps]
        res.update(images_per_sec_median=round(statistics.median(ips), 1), images_per_sec_min=round(min(ips), 1),
                   images_per_sec_max=round(max(ips), 1), step_time_ms_median=round(statistics.median(st) * 1000, 3),
                   gpu_util_median=round(statistics.median(util), 1) if util else None,
                   steps_followed=steps[-1]["step"],
                   startup_s=round(steps[0]["time"] - wall0, 1))
    else:
        res["tail"] = out[-3000:]
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if steps else 1


if __name__ == "__main__":
    sys.exit(main())
