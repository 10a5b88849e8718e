"""The README's main job, `ddpctl up --nodes 2`, from command to exit (target <= 15 s, image present).

Each run starts the job attached, exactly as the quickstart does (default CPU image, the default `ddp-train`
toy run with its cross-rank sync check), and times the process from start to exit; the job's containers and
network are removed afterwards, outside the timing. A unique job name keeps runs apart from other jobs on a
shared engine. Prints every run, the median and the machine.

    python benchmarks/quickstart.py [--runs 5] [--image ddpctl/ddp-train:cpu] [--target 15]

Exit status 1 when the median is above the target or a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path


def ddpctl_path() -> str:
    return str(Path(sys.executable).parent / "ddpctl")


def one_run(image: str | None, extra: list[str]) -> tuple[float, dict]:
    name = f"qs-{uuid.uuid4().hex[:8]}"
    argv = [ddpctl_path(), "up", "--nodes", "2", "--name", name, *(["--image", image] if image else []), *extra]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t0
    finally:
        subprocess.run([ddpctl_path(), "down", name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    summary = {}
    for line in proc.stdout.splitlines():
        text = line.split("| ", 1)[-1]
        if text.startswith('{"event": "summary"'):
            summary = json.loads(text)
    return wall, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", default=None, help="default: the quickstart's default CPU image")
    ap.add_argument("--target", type=float, default=15.0)
    ap.add_argument("extra", nargs="*", help="more `ddpctl up` arguments (after --)")
    args = ap.parse_args()
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
          f"load average before {load[0]:.2f}" if load[0] != "?" else "")
    shown = ["ddpctl", "up", "--nodes", "2"] + (["--image", args.image] if args.image else []) + args.extra
    print(f"command: {' '.join(shown)}  (x{args.runs}, unique --name per run, 'ddpctl down' after, untimed)")
    times = []
    for i in range(args.runs):
        wall, summary = one_run(args.image, args.extra)
        times.append(wall)
        print(f"run {i + 1}: {wall:.2f} s  (ddp-train wall {summary.get('wall_time_s')} s, "
              f"steps {summary.get('steps')}, threads {summary.get('threads')}, "
              f"sync check {summary.get('sync_check')})", flush=True)
    med = statistics.median(times)
    print(f"median {med:.2f} s, min {min(times):.2f} s, max {max(times):.2f} s over {len(times)} runs "
          f"(target <= {args.target:g} s)")
    return 0 if med <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
