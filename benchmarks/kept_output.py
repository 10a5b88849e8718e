"""A job that printed a lot: ``ddpctl down`` (which keeps its output) in seconds, and the peak RSS of ``ps``,
``status``, ``plot`` and ``down``, before and after the job is taken down.

Targets (docs/BENCHMARKS.md): ``down`` of a job that printed 500k lines <= 10 s, of one that printed 1 GB <= 20 s;
peak RSS of ``ps``, ``status``, ``down`` and ``plot`` <= 150 MB for a job that printed 1 GB.

Starts a 1-node ``ddpctl up -d`` job on this host's Docker Engine whose program writes ``--lines`` plain lines of
``--line-bytes`` bytes (or ``--bytes`` in all), with a progress record (ddp_train.progress.report) every
``--every`` lines, and exits; then runs each command once as a child of this process (wall seconds, and its peak
RSS from wait4), and ``docker logs -t`` of the node once (the Engine's own time to read the log back: the floor
under ``down``). The kept output goes to a temporary XDG_STATE_HOME, removed at the end. Prints one row per
command, the load average before and after, and the commit of the line splitter in use; ``--json`` writes them.

    python benchmarks/kept_output.py --lines 500000 --line-bytes 40
    python benchmarks/kept_output.py --bytes 1e9 --line-bytes 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
# one line (a job's command has no newline): blocks of plain lines, a progress record after each block
PROGRAM = ("import sys; from ddp_train.progress import report; w = sys.stdout.write; block = ('x' * {width} + "
           "'\\n') * {every}; [(w(block), report(step=s + 1, total={steps}, loss=1.0 / (s + 1), "
           "samples_per_sec=1000.0, step_time_s=0.05)) for s in range({steps})]; sys.stdout.flush()")


def measure(args: list[str], env: dict[str, str], timeout: float = 900) -> dict:
    """One ddpctl command: wall seconds, peak RSS (MB, from wait4), exit code, its last stderr line."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([DDPCTL, *args], stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        err.seek(0)
        tail = err.read().decode("utf-8", "replace").strip().splitlines()
    return {"command": "ddpctl " + " ".join(args), "seconds": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "exit": p.returncode, "stderr_tail": tail[-1][:200] if tail else ""}


def _exited(job: str) -> bool:
    p = subprocess.run(["docker", "ps", "-a", "--filter", f"label=ddpctl.job={job}", "--format", "{{.State}}"],
                       capture_output=True, text=True, timeout=60)
    states = p.stdout.split()
    return bool(states) and all(s in ("exited", "dead") for s in states)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default=os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu"))
    ap.add_argument("--lines", type=float, default=None, help="plain lines the job prints")
    ap.add_argument("--bytes", type=float, default=None, help="or: bytes of plain lines the job prints")
    ap.add_argument("--line-bytes", type=int, default=40, help="bytes of one plain line (newline included)")
    ap.add_argument("--every", type=int, default=1000, help="plain lines between two progress records")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    width = max(1, a.line_bytes - 1)
    lines = int(a.lines) if a.lines else int((a.bytes or 5e5 * a.line_bytes) // a.line_bytes)
    steps = max(1, lines // a.every)
    state = tempfile.mkdtemp(prefix="kept-bench-")
    env = dict(os.environ, XDG_STATE_HOME=state, NO_COLOR="1")
    job = f"keptbench{uuid.uuid4().hex[:6]}"
    load_before = os.getloadavg()
    rows: list[dict] = []
    try:
        t0 = time.perf_counter()
        up = subprocess.run([DDPCTL, "up", "--name", job, "--image", a.image, "-d", "--", "python", "-c",
                             PROGRAM.format(width=width, every=a.every, steps=steps)],
                            capture_output=True, text=True, timeout=600, env=env)
        if up.returncode != 0:
            print(up.stderr, file=sys.stderr)
            return 1
        while not _exited(job):
            time.sleep(1)
        printed = steps * a.every * (width + 1)
        print(f"job {job} printed {steps * a.every:,} lines ({printed / 1e6:,.0f} MB) and {steps:,} records in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        t1 = time.perf_counter()  # the floor: the Engine reading the log back to its own client
        subprocess.run(["docker", "logs", "-t", f"{job}-node-0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=900)
        rows.append({"command": "docker logs -t (reference)", "seconds": round(time.perf_counter() - t1, 2),
                     "peak_rss_mb": None, "exit": 0, "stderr_tail": "", "after_down": False})
        print(f"{'docker logs -t (the Engine alone, for reference)':67}{rows[-1]['seconds']:8.2f} s", flush=True)
        png = Path(state) / "p.png"
        for args in (["ps"], ["status", job], ["plot", job, "-o", str(png)], ["down", job],
                     ["ps", "--all"], ["status", job], ["logs", job, "--tail", "5"], ["plot", job, "-o", str(png)]):
            row = measure(args, env)
            row["after_down"] = any(r["command"].startswith("ddpctl down") for r in rows)
            rows.append(row)
            print(f"{row['command'][:60]:60} {'(kept) ' if row['after_down'] else '       '}{row['seconds']:8.2f} s "
                  f"{row['peak_rss_mb']:8.1f} MB  exit {row['exit']}  {row['stderr_tail'][:80]}", flush=True)
        kept = Path(state) / "ddpctl" / "jobs" / job
        kept_bytes = sum(p.stat().st_size for p in kept.rglob("*") if p.is_file()) if kept.is_dir() else 0
    finally:
        subprocess.run([DDPCTL, "down", job], capture_output=True, env=env, timeout=900)
        shutil.rmtree(state, ignore_errors=True)
    splitter = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %<(60,trunc)%s", "--",
                               "src/ddpctl/joboutput/lines.py"], capture_output=True, text=True).stdout.strip()
    result = {"machine": f"{platform.node()} {os.cpu_count()} cores {platform.machine()}",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "lines": steps * a.every,
              "bytes": steps * a.every * (width + 1), "records": steps, "kept_bytes": kept_bytes,
              "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in os.getloadavg()], "splitter": splitter, "rows": rows}
    print(f"kept {kept_bytes / 1e6:.1f} MB; load average {result['load_before']} -> {result['load_after']}; "
          f"line splitter: {splitter}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
