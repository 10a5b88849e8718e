"""The rendered sbatch script, run for real: bash executes it, a local ``srun`` starts its command once per
"node" (as Slurm does, with SLURM_NODEID/SLURM_PROCID set), and real torchrun agents meet in the c10d
rendezvous the script points them at, whose store is the script's own store step. Every process reports the RANK/WORLD_SIZE torchrun gave it.

Only Slurm itself is a stand-in (tests/slurm runs the same script on a real Slurm cluster); bash, torchrun
and its rendezvous are real.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.render import slurm
from ddpctl.spec import spec_from_dict
from ports import free_port

pytestmark = pytest.mark.distributed

_SRUN = """#!/usr/bin/env python3
# (the test's interpreter, found on PATH: a '#!' line cannot hold a path with a space)
# Local srun: run the command once per node in parallel, like `srun --nodes=N --ntasks-per-node=1`.
import os, subprocess, sys
args = sys.argv[1:]
overlap = "--overlap" in args
while args and args[0].startswith("--"):
    args.pop(0)
if overlap:  # the rendezvous store's step (--nodes=1): become the store; the script kills it at the end
    os.execvp(args[0], args)
n = int(os.environ["SLURM_JOB_NUM_NODES"])
procs = []
for i in range(n):
    env = dict(os.environ, SLURM_NODEID=str(i), SLURM_PROCID=str(i), SLURM_LOCALID="0")
    out = open(os.path.join(os.environ["OUT_DIR"], f"node-{{i}}.out"), "w")
    procs.append(subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT))
codes = [p.wait(timeout=240) for p in procs]
sys.exit(max(codes))
"""
_SCONTROL = """#!/bin/sh
[ "$1" = show ] && [ "$2" = hostnames ] || exit 3
echo 127.0.0.1; echo 127.0.0.1
"""
# one write() per rank: two ranks of a node share one output file, and print()'s separate newline write let
# their lines interleave ('RANKINFO {...}RANKINFO {...}' seen once on a loaded 2-core VM)
_REPORT = ("import json, os; os.write(1, ('RANKINFO ' + json.dumps({k: os.environ[k] for k in "
           "('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'GROUP_RANK', 'MASTER_ADDR')}) + '\\n').encode())")


@pytest.mark.parametrize("nodes, nproc", [(2, 2)])
def test_sbatch_script_rendezvous_gives_distinct_ranks(tmp_path, nodes, nproc):
    spec = spec_from_dict({"name": "slurm-real", "nodes": nodes, "nproc_per_node": nproc, "port": free_port(),
                           "command": ["python", "-c", _REPORT]})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(_SRUN.format())
    (bin_dir / "scontrol").write_text(_SCONTROL)
    for f in ("srun", "scontrol"):
        (bin_dir / f).chmod(0o755)
    script = tmp_path / "job.sbatch"
    script.write_text(slurm.render(spec))
    venv_bin = Path(sys.executable).parent  # torchrun and python of this interpreter
    env = {**os.environ, "PATH": f"{bin_dir}:{venv_bin}:/usr/bin:/bin", "OUT_DIR": str(tmp_path),
           "SLURM_JOB_ID": "777", "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_JOB_NODELIST": "n[1-2]",
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    outs = [(tmp_path / f"node-{i}.out").read_text() for i in range(nodes)]
    assert result.returncode == 0, result.stderr + "\n".join(outs)
    infos = [json.loads(m) for out in outs for m in re.findall(r"RANKINFO (\{[^{}]*\})", out)]
    world = nodes * nproc
    assert len(infos) == world
    assert sorted(int(i["RANK"]) for i in infos) == list(range(world))
    assert {i["WORLD_SIZE"] for i in infos} == {str(world)}
    assert sorted(int(i["GROUP_RANK"]) for i in infos) == sorted(list(range(nodes)) * nproc)
    assert len({i["MASTER_ADDR"] for i in infos}) == 1
