"""Benchmarks for images and the local cluster. Results go to docs/BENCHMARKS.md by hand (machine, date, command).

  build       CPU image build time: cold (--no-cache, base present), warm (layer cache, --force) and the
              "up to date" check; the image size.
  up          `ddpctl up --nodes 2` from the command to the first training step printed (image present).
  throughput  ddp-train img/s in a container (`ddpctl up --nodes 1 --nproc-per-node P`) vs on the host
              (`torchrun --nproc-per-node P ddp-train`), same machine, runs interleaved, median of R.

Usage (from the repository root, venv active; ddp-train must be the real one, not the stub):

  python benchmarks/images_cluster.py build --wheelhouse wheelhouse
  python benchmarks/images_cluster.py up --image ddpctl/ddp-train:cpu --repeat 3
  python benchmarks/images_cluster.py throughput --image ddpctl/ddp-train:cpu --repeat 3 --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
DDPCTL = str(BIN / "ddpctl")


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    proc = sh(argv)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - t0


def bench_build(args) -> dict:
    tag = args.tag
    base = [DDPCTL, "image", "build", "--cpu", "--wheelhouse", args.wheelhouse, "--tag", tag]
    cold = timed(base + ["--no-cache"])
    warm = timed(base + ["--force"])
    check = timed(base)
    size = int(sh(["docker", "image", "inspect", "-f", "{{.Size}}", tag]).stdout.strip())
    base_size = int(sh(["docker", "image", "inspect", "-f", "{{.Size}}", "ddpctl/base:bookworm"]).stdout.strip())
    return {"cold_s": round(cold, 1), "warm_s": round(warm, 1), "up_to_date_s": round(check, 2),
            "image_bytes": size, "image_mb": round(size / 1e6), "base_mb": round(base_size / 1e6)}


def time_to_first_step(image: str, name: str) -> float:
    argv = [DDPCTL, "up", "--name", name, "--image", image, "--nodes", "2", "--nproc-per-node", "2", "--rm",
            "--", "ddp-train", "--log-interval", "1", "--progress", "lines", "--max-steps", "3"]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=dict(os.environ, NO_COLOR="1"))
    first = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if first is None and " step 1/" in line:
            first = time.monotonic() - t0
    proc.wait()
    sh([DDPCTL, "down", name])
    if first is None or proc.returncode != 0:
        raise SystemExit(f"no training step seen (exit {proc.returncode})")
    return first


def bench_up(args) -> dict:
    runs = [time_to_first_step(args.image, f"bench-up-{i}") for i in range(args.repeat)]
    return {"runs_s": [round(r, 2) for r in runs], "median_s": round(statistics.median(runs), 2)}


def _summary(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        text = line.split(" | ", 1)[-1]
        if text.startswith('{"event": "summary"'):
            return json.loads(text)
    raise SystemExit("no summary line:\n" + stdout[-2000:])


def bench_throughput(args) -> dict:
    train = ["ddp-train", "--max-steps", str(args.steps), "--warmup-steps", "5", "--log-interval", "1000",
             "--progress", "lines", "--no-eval", "--sync-check", "off"]
    host_cmd = [str(BIN / "torchrun"), "--nproc-per-node", str(args.procs), "--master-port", "29611",
                "--no-python", str(BIN / "ddp-train"), *train[1:]]
    ctr_cmd = [DDPCTL, "up", "--name", "bench-tp", "--image", args.image, "--nodes", "1", "--nproc-per-node",
               str(args.procs), "--rm", "--", *train]
    host, ctr = [], []
    for _ in range(args.repeat):  # interleaved, so load changes hit both sides alike
        p = sh(host_cmd)
        host.append(_summary(p.stdout)["images_per_sec"])
        p = sh(ctr_cmd)
        ctr.append(_summary(p.stdout)["images_per_sec"])
    h, c = statistics.median(host), statistics.median(ctr)
    return {"procs": args.procs, "steps": args.steps, "host_img_s": host, "container_img_s": ctr,
            "host_median": h, "container_median": c, "ratio": round(c / h, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("section", choices=["build", "up", "throughput"])
    ap.add_argument("--image", default="ddpctl/ddp-train:cpu")
    ap.add_argument("--tag", default="ddpctl/ddp-train:bench")
    ap.add_argument("--wheelhouse", default="wheelhouse")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--procs", type=int, default=2)
    args = ap.parse_args()
    result = {"build": bench_build, "up": bench_up, "throughput": bench_throughput}[args.section](args)
    print(json.dumps({"section": args.section, "machine": f"{os.cpu_count()} cores", **result}))


if __name__ == "__main__":
    main()
