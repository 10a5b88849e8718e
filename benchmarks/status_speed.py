"""``ddpctl status`` on an 8-node job: seconds from command to answer (target < 1 s on a 2-core machine).

Starts an 8-node ``ddpctl up -d`` job on this host's Docker Engine whose ranks each write --records progress
records (ddp_train.progress.report, no torch) plus as many plain lines, then sleep; times ``ddpctl status JOB``
and ``ddpctl status JOB --json`` (median of --runs, CPU time too: the wall time moves with the machine's load)
and ``ddpctl ps``; removes the job.

    python benchmarks/status_speed.py [--image ddpctl/ddp-train:cpu] [--nodes 8] [--records 500] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
PROGRAM = ("import time; from ddp_train.progress import report; "  # one line: a job's command has no newline
           "[(print('a plain line of the program', s, flush=True), report(step=s + 1, total=100000, "
           "loss=1.0 / (s + 1), samples_per_sec=1000.0, step_time_s=0.05)) for s in range({n})]; time.sleep(3600)")


def _run(*args: str) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([DDPCTL, *args], capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default=os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu"))
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--records", type=int, default=500, help="records per rank before the status calls")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    job = f"statbench{uuid.uuid4().hex[:6]}"
    up = subprocess.run([DDPCTL, "up", "--name", job, "-n", str(a.nodes), "--image", a.image, "-d", "--",
                         "python", "-c", PROGRAM.format(n=a.records)], capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # every rank has written all its records
            p = subprocess.run([DDPCTL, "status", job, "--json"], capture_output=True, text=True, timeout=120)
            if p.returncode == 0 and f'"step":{a.records},' in p.stdout.replace(" ", "") \
                    and p.stdout.count('"rank":') >= a.nodes:
                import json

                st = json.loads(p.stdout)
                if len(st["ranks"]) == a.nodes and all(r["step"] == a.records for r in st["ranks"]):
                    break
            time.sleep(2)
        else:
            print("the ranks did not write their records in time", file=sys.stderr)
            return 1
        print(f"load average before: {os.getloadavg()[0]:.2f}; {a.nodes} nodes x {a.records} records + "
              f"{a.records} plain lines each")
        worst = 0.0
        for args in (("status", job), ("status", job, "--json"), ("ps",)):
            walls, cpus = [], []
            for _ in range(a.runs):
                wall, cpu, p = _run(*args)
                assert p.returncode == 0, p.stderr
                walls.append(wall)
                cpus.append(cpu)
            med = statistics.median(walls)
            worst = max(worst, med) if args[0] == "status" else worst
            print(f"ddpctl {' '.join(a if a != job else 'JOB' for a in args):20s} median {med:.3f} s "
                  f"(min {min(walls):.3f}, max {max(walls):.3f}), CPU {statistics.median(cpus):.3f} s")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0 if worst < 1.0 else 1
    finally:
        subprocess.run([DDPCTL, "down", job], capture_output=True, timeout=300)


if __name__ == "__main__":
    sys.exit(main())
