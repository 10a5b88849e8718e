"""How often the non-master node prints rendezvous shutdown errors at the end of a Slurm job, per launch variant.

Starts the one-machine Slurm cluster of the tests (tests/support/cluster.py: root, slurm-wlm, munge), renders
``ddpctl render slurm -n 2 -- ddp-train --max-steps 3 --no-eval --quiet`` and derives the two earlier
launches from it, then submits each variant RUNS times, interleaved, with ``sbatch --wait``:

- ``store``: the rendered script (c10d, the store in a step of its own, every torchrun a client);
- ``c10d``: the same without the store step and without ``is_host=false`` (a torchrun hosts the store);
- ``static``: a static rendezvous, node rank from each task's SLURM_NODEID, node 0's torchrun hosts the store.

A run counts as noisy when its output has ``Traceback``, ``TCPStore.cpp`` or ``failed to``.

    .venv/bin/python benchmarks/slurm_rendezvous.py --runs 15
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # the tests' one-machine Slurm cluster
import cluster  # noqa: E402

NOISE = ("Traceback", "TCPStore.cpp", "failed to")


def variants(script: str, port: int) -> dict[str, str]:
    no_store = re.sub(r"# The store runs.*?\ntrap [^\n]*\n", "", script, flags=re.S)
    c10d = no_store.replace(" --rdzv-conf is_host=false", "")
    static = no_store.replace(
        f'--rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:{port}" --rdzv-id "$SLURM_JOB_ID" --rdzv-conf is_host=false',
        f'--master-addr "$MASTER_ADDR" --master-port {port}').replace(
        "--kill-on-bad-exit=1 \\\n", "--kill-on-bad-exit=1 \\\n    sh -c 'export PET_NODE_RANK=\"$SLURM_NODEID\"; exec \"$@\"' sh \\\n")
    assert c10d != script and static != no_store, "the rendered script changed shape; update the variants"
    return {"store": script, "c10d": c10d, "static": static}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--port", type=int, default=29671)
    args = ap.parse_args()
    ddpctl = str(Path(sys.executable).with_name("ddpctl"))
    text = subprocess.run([ddpctl, "render", "slurm", "-n", "2", "--port", str(args.port), "--", "ddp-train",
                           "--max-steps", "3", "--no-eval", "--quiet"], check=True, capture_output=True,
                          text=True).stdout
    cluster.ensure_hosts()
    c = cluster.SlurmCluster(Path(tempfile.mkdtemp(prefix="slurm-rdzv-")))
    noisy: dict[str, int] = {}
    try:
        c.start()
        scripts = {}
        for name, body in variants(text, args.port).items():
            scripts[name] = c.root / f"{name}.sbatch"
            scripts[name].write_text(body)
        env = c.env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
        for i in range(args.runs):
            for name, path in scripts.items():
                r = subprocess.run(["sbatch", "--parsable", "--wait", "--job-name", name, "--output",
                                    f"{name}-{i}.out", str(path)], env=env, cwd=c.root, capture_output=True,
                                   text=True, timeout=600)
                out = (c.root / f"{name}-{i}.out").read_text()
                bad = any(x in out for x in NOISE)
                noisy[name] = noisy.get(name, 0) + bad
                print(f"run {i + 1} {name}: exit {r.returncode}{' NOISY' if bad else ''}", flush=True)
    finally:
        c.stop()
        shutil.rmtree(c.root, ignore_errors=True)
    for name, n in noisy.items():
        print(f"{name}: {n} of {args.runs} runs printed rendezvous shutdown errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
