"""Recovery time of `ddpctl up --max-restarts`: from `docker kill` of a node to the job's next training step.

Starts a 2-node CPU job attached (ddp-train, deterministic, a checkpoint every --every steps, a log line per
step), kills a node container (node 1, node 0, node 1, ...) a few steps after each (re)start, and times each
kill to: the restart line of ddpctl (failure noticed, the other node stopped), both new containers running
(`docker inspect` StartedAt), ddp-train's "resumed from" line, and the first training step after it. Prints
every kill, the median and the machine; the job is removed afterwards.

    python benchmarks/recovery.py [--kills 3] [--every 4] [--image ddpctl/ddp-train:cpu] [--target 20]

Exit status 1 when the median kill -> next step is above the target or the job fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

STEP = re.compile(r"^node-0 rank-0 \| epoch \d+/\d+ step \d+/\d+ \(global (\d+)\)")
RESUMED = re.compile(r"ddp-train: resumed from /checkpoints/ckpt-(\d+)\.pt")


def ddpctl_path() -> str:
    return str(Path(sys.executable).parent / "ddpctl")


def started_at(name: str) -> float:
    """A container's StartedAt as epoch seconds (docker inspect; nanoseconds cut to microseconds)."""
    text = subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", name], capture_output=True,
                          text=True, check=True).stdout.strip()
    head, _, frac = text.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc).timestamp() + float(f"0.{frac[:6] or 0}")


class Lines:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.q: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.q.put((time.time(), line.rstrip("\n")))

    def until(self, pattern: re.Pattern | str, timeout: float = 300) -> tuple[float, re.Match | str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                t, line = self.q.get(timeout=1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if isinstance(pattern, str):
                if line.startswith(pattern):
                    return t, line
            elif m := pattern.search(line):
                return t, m
        raise SystemExit("timed out; last lines:\n" + "\n".join(self.seen[-20:]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--every", type=int, default=4, help="ddp-train --checkpoint-every (steps)")
    ap.add_argument("--after", type=int, default=5, help="steps after each (re)start before the kill")
    ap.add_argument("--image", default=None, help="default: ddpctl's default CPU image")
    ap.add_argument("--target", type=float, default=20.0)
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    name = f"rec-{uuid.uuid4().hex[:8]}"
    steps = 64 * (args.kills * (args.after + args.every) // 64 + 2)
    argv = [ddpctl_path(), "up", "--name", name, "--nodes", "2", "--max-restarts", str(args.kills),
            *(["--image", args.image] if args.image else []), "--", "ddp-train", "--deterministic",
            "--train-size", str(steps * 64), "--epochs", "1", "--no-eval", "--log-interval", "1",
            "--checkpoint-every", str(args.every)]
    print("command:", " ".join(argv[1:]))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, NO_COLOR="1"))
    lines = Lines(proc)
    rows = []
    try:
        _, m = lines.until(STEP)
        step = int(m.group(1))
        for k in range(args.kills):
            target = step + args.after
            while step < target:
                _, m = lines.until(STEP)
                step = int(m.group(1))
            node = 1 - k % 2
            t_kill = time.time()
            subprocess.run(["docker", "kill", f"{name}-node-{node}"], capture_output=True, check=True)
            t_line, _ = lines.until(f"restart {k + 1}/")
            t_resumed, m = lines.until(RESUMED)
            resumed = int(m.group(1))
            t_step, m = lines.until(STEP)
            t_up = max(started_at(f"{name}-node-{r}") for r in (0, 1))
            rows.append((node, step, resumed, t_line - t_kill, t_up - t_kill, t_resumed - t_kill, t_step - t_kill))
            step = int(m.group(1))
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([ddpctl_path(), "down", name], capture_output=True, text=True)
    load1 = os.getloadavg()[0]
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
          f"load average {load0:.2f} before, {load1:.2f} after")
    print("kill  node  step  resumed  restart line  nodes started  resumed line  next step")
    for i, (node, step, resumed, a, b, c, d) in enumerate(rows, 1):
        print(f"{i:>4}  {node:>4}  {step:>4}  {resumed:>7}  {a:>11.1f}s  {b:>12.1f}s  {c:>11.1f}s  {d:>8.1f}s")
    med = statistics.median(r[-1] for r in rows)
    print(f"kill -> next training step: median {med:.1f} s (target {args.target:.0f} s); job exit code {code}")
    return 0 if code == 0 and med <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
