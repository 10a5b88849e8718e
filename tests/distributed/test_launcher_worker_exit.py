"""How a Python worker ends under ``ddp-train-launch`` (ddp_train.launcher.worker, .exits), with real torchrun
agents, worker processes and gloo process groups:

- the abort at exit: a library's daemon thread still waiting in a gloo call when the program ends, whose peer
  closes the connection while this process finalises. Under the plain interpreter that call returns during
  finalisation and the process dies with "terminate called without an active exception" (SIGABRT, 134) after
  its program finished; through the worker runner it exits 0;
- a rank that exits 3 after training: the launcher exits 3 naming it;
- a rank whose program ended but whose process does not exit (a non-daemon thread that never returns): the
  launcher kills it after DDP_TRAIN_EXIT_TIMEOUT seconds and exits 124 with one line naming it.
"""

import os
import subprocess
import sys
import time

import pytest

from end_of_training import SCRIPT

pytestmark = pytest.mark.distributed

# rank 0: a daemon thread blocked in a gloo recv (as a library's helper thread may be) and a finalisation made
# long (an object whose __del__ takes 6 s); rank 1 ends its process group 1 s after the barrier, which makes
# rank 0's pending recv return while rank 0 is finalising.
ABORTS = '''
import threading, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
class SlowTeardown:
    def __del__(self):
        time.sleep(6)
if rank == 0:
    threading.Thread(target=lambda: dist.recv(torch.zeros(1), src=1), daemon=True).start()
    keep = SlowTeardown()
dist.barrier()
if rank == 1:
    time.sleep(1)
print(f"trained rank {rank}", flush=True)
dist.destroy_process_group()
'''



def launch(tmp_path, script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``script`` on 2 ranks under ddp-train-launch; ``env`` adds variables (a value None removes one)."""
    path = tmp_path / "train.py"
    path.write_text(script)
    full = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, "-m", "ddp_train.launcher.run", "--standalone", "--nproc-per-node", "2",
                           "--no-python", sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=240, env={k: v for k, v in full.items() if v is not None})


def test_a_thread_left_in_a_gloo_call_no_longer_aborts_the_exit(tmp_path):
    for _ in range(3):  # the command exactly as given: the abort is a race at exit, which load can move
        plain = launch(tmp_path, ABORTS, DDP_TRAIN_LAUNCH_WORKER="off")
        assert "rank-0 | trained rank 0" in plain.stdout
        if plain.returncode == 134:
            break
    else:
        pytest.skip("the abort at exit did not reproduce in 3 plain runs on this loaded machine: the runner's half "
                    "would prove nothing")
    assert "terminate called without an active exception" in plain.stderr
    assert plain.stderr.splitlines()[-1].startswith("ddp-train-launch: rank 0 failed (exit code 134, killed by SIGABRT)")
    run = launch(tmp_path, ABORTS)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rank-0 | trained rank 0" in run.stdout and "terminate called" not in run.stderr


def test_left_open_group_is_ended_and_said_once(tmp_path):
    run = launch(tmp_path, SCRIPT, "ok")
    assert run.returncode == 0, run.stderr[-3000:]
    said = [line for line in run.stderr.splitlines() if "left its process group open" in line]
    assert len(said) == 1 and said[0].startswith("rank-0 | ddp-train-launch: "), run.stderr[-3000:]


RAISES_ON_1 = """
import time, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(0.5)
    raise ValueError("boom on rank 1")
dist.barrier()
"""


def test_a_failed_rank_keeps_its_error_as_the_last_line(tmp_path):
    run = launch(tmp_path, RAISES_ON_1)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "left its process group open" not in run.stderr, run.stderr[-3000:]
    assert "ddp-train-launch: rank 1 failed (exit code 1): ValueError: boom on rank 1" in run.stderr, run.stderr[-3000:]


# rank 1 fails and closes its connections at once, then takes long to leave (an exit handler): rank 0 fails on the
# lost connection and exits first, and the agent stops rank 1 with SIGTERM. The blame and the exit code are still
# rank 1's program's.
RAISES_ON_1_SLOW_TO_LEAVE = """
import atexit, time, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    atexit.register(time.sleep, 30)
    time.sleep(0.5)
    dist.destroy_process_group()
    raise ValueError("boom on rank 1")
dist.barrier()
"""


def test_a_failed_rank_the_agent_stopped_while_it_left_is_still_the_root_cause(tmp_path):
    run = launch(tmp_path, RAISES_ON_1_SLOW_TO_LEAVE)
    assert "closing signal SIGTERM" in run.stderr, run.stderr[-3000:]  # the case: rank 1 was stopped, not exited
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.splitlines()[-1] == "ddp-train-launch: rank 1 failed (exit code 1): ValueError: boom on rank 1"


def test_exit_code_after_training_is_kept_and_named(tmp_path):
    run = launch(tmp_path, SCRIPT, "exit3")
    assert "rank-1 | trained rank 1" in run.stdout
    assert run.returncode == 3, run.stderr[-3000:]
    assert run.stderr.splitlines()[-1].startswith("ddp-train-launch: rank 1 failed (exit code 3)")


def test_a_hang_at_exit_is_bounded_and_said_in_one_line(tmp_path):
    t0 = time.monotonic()
    run = launch(tmp_path, SCRIPT, "hang", DDP_TRAIN_EXIT_TIMEOUT="20")
    took = time.monotonic() - t0
    assert "rank-1 | trained rank 1" in run.stdout
    assert run.returncode == 124, run.stderr[-3000:]
    last = run.stderr.splitlines()[-1]
    assert last.startswith("ddp-train-launch: rank 1 failed (exit code 124, did not exit): its program ended but "
                           "the process was still running 20 s later (non-daemon threads still running at its end: "
                           "never-ends); killed it"), last
    assert took < 200, took


# Leaves through os._exit (it used torch.distributed): what it printed without a flush, through Python and through
# the C library (a pipe is fully buffered: nothing of either reaches it before the exit), its atexit handler, a
# file it left open and its sys.exit code must all survive.
LEAVES_BUFFERED = '''
import atexit, ctypes, os, sys, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(nn.Linear(4, 2))  # keeps its process group past destroy_process_group, as the tutorial script does
dist.barrier()
dist.destroy_process_group()
atexit.register(lambda: print(f"atexit rank {rank}"))
left_open = open(os.path.join(sys.argv[1], f"left-open-{rank}.txt"), "w")
left_open.write("kept")
print(f"python unflushed rank {rank}")
ctypes.CDLL(None).printf(b"c stdio unflushed rank %d\\n", rank)
sys.exit(5 if rank == 1 else 0)
'''


def test_leaving_without_finalisation_keeps_output_handlers_files_and_the_exit_code(tmp_path):
    run = launch(tmp_path, LEAVES_BUFFERED, str(tmp_path), PYTHONUNBUFFERED=None)  # buffered, as by default
    assert run.returncode == 5, run.stderr[-3000:]
    for rank in (0, 1):
        for line in (f"python unflushed rank {rank}", f"c stdio unflushed rank {rank}", f"atexit rank {rank}"):
            assert f"rank-{rank} | {line}" in run.stdout, run.stdout[-3000:]
        assert (tmp_path / f"left-open-{rank}.txt").read_text() == "kept"
    assert run.stderr.splitlines()[-1].startswith("ddp-train-launch: rank 1 failed (exit code 5)"), run.stderr[-2000:]
