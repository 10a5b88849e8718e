"""The step-compute timing that feeds the communication plan's prediction (ddp_train.comm.compression
.timed_compute) on a real two-rank gloo group: every rank gets the slowest rank's time; a probe that fails on one
rank (out of memory, say) leaves every rank without a prediction, the failing one saying why in one line, and no
rank waits on a collective the other skipped."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.distributed

PROGRAM = r"""
import json, sys, torch, torch.distributed as dist
from ddp_train.comm.compression import timed_compute
rank, store, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
def probe():
    if mode == "fail" and rank == 1:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return (0.010 if rank == 0 else 0.025), 1234
print(json.dumps(timed_compute(probe, torch.device("cpu"))), flush=True)
dist.destroy_process_group()
"""


def _run(tmp_path, mode):
    store = tmp_path / f"store-{mode}"
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM, str(r), str(store), mode], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        out = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], out
    return [(json.loads(o.strip().splitlines()[-1]), e) for o, e in out]


def test_every_rank_gets_the_slowest_time(tmp_path):
    (r0, _), (r1, _) = _run(tmp_path, "ok")
    assert r0 == r1 == [0.025, 1234]


def test_a_failure_on_one_rank_leaves_every_rank_without_a_prediction(tmp_path):
    (r0, err0), (r1, err1) = _run(tmp_path, "fail")
    assert r0 == r1 == [None, None]
    said = [line for line in err1.splitlines() if "timing the step's compute failed" in line]
    assert said == ["ddp-train: warning: timing the step's compute failed (OutOfMemoryError: CUDA out of memory. "
                    "Tried to allocate 2.00 GiB); the gradients' plan rests on the link alone, with no prediction"]
    assert "timing the step's compute failed" not in err0
