"""Consecutive runs of each third-party script of the compatibility matrix through `ddpctl up` on 2 nodes
(target: every run exits 0; docs/compatibility.md).

The project is tests/integration/compatibility/ copied to a temporary folder (its requirements.txt names
Lightning, Accelerate and transformers); the first run bakes the workspace image (the requirements layer from
the host's package index), every later run finds it. Each run is `ddpctl up -n 2 --workdir DIR --bake -- python
SCRIPT` with a unique name (and what the user sets for the entry, as the suite does: `-e ACCELERATE_USE_CPU=true`
for Accelerate on CPU), then `ddpctl down` (untimed). A run counts as good when `up` exits 0, both ranks printed
their last line ("rank 0/2", "rank 1/2") and no "terminate called" reached its output; a failed run's last lines
are printed and the tool goes on.

    python benchmarks/third_party_scripts.py [--runs 20] [--entries plain_ddp,accelerate_train,...]
        [--image ddpctl/ddp-train:cpu] [--deadline SECONDS] [--json out.json]

`--deadline` ends the tool after the run in progress once that many seconds have passed (what was done is
reported, with how many runs each entry got). Exit status 1 when any run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "integration" / "compatibility"
ENTRIES = ("plain_ddp", "plain_ddp_no_destroy", "local_rank", "lightning_train", "accelerate_train",
           "transformers_trainer", "dataloader_workers")
# what the user sets for an entry (docs/compatibility.md; tests/integration/test_third_party_scripts.py's ENV)
ENV = {"accelerate_train": ["-e", "ACCELERATE_USE_CPU=true"]}


def ddpctl_path() -> str:
    return str(Path(sys.executable).parent / "ddpctl")


def one_run(project: Path, image: str, script: str) -> tuple[int, float, str]:
    """(exit code, seconds, the output's last lines); exit -1: `up` exited 0 but its output shows a failure."""
    name = f"tp-{uuid.uuid4().hex[:8]}"
    argv = [ddpctl_path(), "up", "-n", "2", "--name", name, "--image", image, "--workdir", str(project), "--bake",
            *ENV.get(script, []), "--", "python", f"{script}.py"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - t0
    finally:
        subprocess.run([ddpctl_path(), "down", name], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    code = proc.returncode
    tail = "\n".join(text.splitlines()[-6:])
    if code == 0 and "terminate called" in text:
        code, tail = -1, "exit 0, but 'terminate called' in the output (an abort that up did not report)\n" + tail
    elif code == 0 and not all(f"rank {rank}/2 " in proc.stdout for rank in (0, 1)):
        code, tail = -1, "exit 0, but a rank's last line ('rank N/2 ...') is missing\n" + tail
    return code, wall, tail


def remove_images(project: Path) -> None:
    """The workspace images baked from this run's project folder and their requirements layers."""
    found = subprocess.run(["docker", "images", "-q", "--filter", f"label=ai.ddpctl.workspace.source={project}"],
                           capture_output=True, text=True, timeout=120).stdout.split()
    for image in dict.fromkeys(found):
        deps = subprocess.run(["docker", "image", "inspect", "-f",
                               '{{index .Config.Labels "ai.ddpctl.workspace.deps-hash"}}', image],
                              capture_output=True, text=True, timeout=120).stdout.strip()
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, timeout=300)
        if deps:
            subprocess.run(["docker", "rmi", f"ddpctl/workspace-deps:{deps}"], capture_output=True, timeout=300)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--entries", default=",".join(ENTRIES))
    ap.add_argument("--image", default="ddpctl/ddp-train:cpu")
    ap.add_argument("--deadline", type=float, default=0, help="seconds; 0: none")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    entries = [e for e in args.entries.split(",") if e]
    unknown = [e for e in entries if e not in ENTRIES]
    if unknown:
        print(f"error: unknown entries {unknown}; choose from {', '.join(ENTRIES)}", file=sys.stderr)
        return 2
    load = os.getloadavg()
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
          f"load average before {load[0]:.2f}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"command: ddpctl up -n 2 --image {args.image} --workdir PROJECT --bake [-e ACCELERATE_USE_CPU=true for "
          f"accelerate_train] -- python SCRIPT.py "
          f"(x{args.runs} per entry, round robin over {len(entries)} entries)", flush=True)
    t0 = time.monotonic()
    results: dict[str, list[tuple[int, float, str]]] = {e: [] for e in entries}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "compat-project"
        shutil.copytree(SCRIPTS, project, ignore=shutil.ignore_patterns("__pycache__"))
        stopped = False
        for i in range(args.runs):
            for entry in entries:
                if args.deadline and time.monotonic() - t0 > args.deadline:
                    stopped = True
                    break
                code, wall, tail = one_run(project, args.image, entry)
                results[entry].append((code, wall, tail if code else ""))
                print(f"run {i + 1} {entry}: exit {code} in {wall:.1f} s (load {os.getloadavg()[0]:.1f})",
                      flush=True)
                if code != 0:
                    print("  " + tail.replace("\n", "\n  "), flush=True)
            if stopped:
                break
        remove_images(project)
    bad = 0
    print("\nentry | runs | exit 0 | median s | max s")
    for entry, runs in results.items():
        ok = sum(1 for c, _, _ in runs if c == 0)
        bad += len(runs) - ok
        walls = [w for _, w, _ in runs] or [0.0]
        print(f"{entry} | {len(runs)} | {ok}/{len(runs)} | {statistics.median(walls):.1f} | {max(walls):.1f}")
    print(f"total {time.monotonic() - t0:.0f} s" + (" (stopped at the deadline)" if stopped else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({e: [{"exit": c, "wall_s": round(w, 2), **({"tail": t} if t else {})}
                                                    for c, w, t in r] for e, r in results.items()}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
