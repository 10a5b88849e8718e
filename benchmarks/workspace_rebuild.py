"""Workspace image rebuild time: `ddpctl image build --workdir DIR` after editing one Python file (target <= 5 s,
requirements layer cached), and with the tree unchanged (no build at all). Wall time of the whole CLI command.

    python benchmarks/workspace_rebuild.py [--base ddpctl/ddp-train:cpu] [--runs 5] [--target 5]

Makes a project in a temporary directory (train.py, a small package, a requirements.txt naming one pure-Python
wheel from a wheelhouse made here), builds it once (the requirements layer: not timed), then per run appends a
line to one module and rebuilds. Removes every image it tagged at the end. Exit 1 when the median is above the
target.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path


def ddpctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "ddpctl"), *args], capture_output=True, text=True)


def wheel(dest: Path) -> None:
    dist = "wsbench-1.0.dist-info"
    files = {"wsbench.py": b"VALUE = 1\n", f"{dist}/METADATA": b"Metadata-Version: 2.1\nName: wsbench\nVersion: 1.0\n",
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
              for p, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(dest / "wsbench-1.0-py3-none-any.whl", "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="ddpctl/ddp-train:cpu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", type=float, default=5.0)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ddpctl-wsbench-"))
    proj, house = tmp / "proj", tmp / "wheelhouse"
    (proj / "model").mkdir(parents=True)
    house.mkdir()
    wheel(house)
    (proj / "train.py").write_text("import wsbench\nfrom model import net\nprint(net.SIZE, wsbench.VALUE)\n")
    (proj / "model" / "__init__.py").write_text("")
    (proj / "model" / "net.py").write_text("SIZE = 1\n")
    (proj / "requirements.txt").write_text("wsbench==1.0\n")
    for i in range(50):  # a project of some size: 50 more modules and a 2 MB data file
        (proj / "model" / f"layer_{i}.py").write_text(f"# layer {i}\n" + "x = 1\n" * 200)
    (proj / "model" / "vocab.bin").write_bytes(os.urandom(2 << 20))
    args = ["image", "build", "--workdir", str(proj), "--base", a.base, "--wheelhouse", str(house),
            "--tag", "ddpctl-bench/workspace"]
    tags: list[str] = []
    try:
        first = ddpctl(*args)
        if first.returncode != 0:
            print(first.stderr, file=sys.stderr)
            return 1
        tags.append(first.stdout.strip())
        edits, unchanged = [], []
        for i in range(a.runs):
            with open(proj / "model" / "net.py", "a") as fh:
                fh.write(f"EDIT_{i} = {i}\n")
            t0 = time.perf_counter()
            out = ddpctl(*args)
            edits.append(time.perf_counter() - t0)
            if out.returncode != 0 or "built " not in out.stderr:
                print(out.stderr, file=sys.stderr)
                return 1
            tags.append(out.stdout.strip())
            t0 = time.perf_counter()
            out = ddpctl(*args)
            unchanged.append(time.perf_counter() - t0)
            if "up to date" not in out.stderr:
                print(out.stderr, file=sys.stderr)
                return 1
        load = os.getloadavg()
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}")
        print(f"base {a.base}; {len(list(proj.rglob('*')))} files")
        print(f"rebuild after editing one .py file: median {statistics.median(edits):.2f} s "
              f"(min {min(edits):.2f}, max {max(edits):.2f}, {a.runs} runs)")
        print(f"unchanged tree (no build):          median {statistics.median(unchanged):.2f} s")
        return 0 if statistics.median(edits) <= a.target else 1
    finally:
        import shutil

        deps = subprocess.run(["docker", "inspect", "-f", '{{index .Config.Labels "ai.ddpctl.workspace.deps-hash"}}',
                               tags[0]], capture_output=True, text=True).stdout.strip() if tags else ""
        for tag in tags + ([f"ddpctl/workspace-deps:{deps}"] if deps else []):  # the deps layer is this run's own
            subprocess.run(["docker", "rmi", tag], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
