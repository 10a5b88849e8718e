"""``ddp-train-launch`` output under real torchrun agents and real gloo process groups: two "nodes" (two
launchers on a static rendezvous on this host, as ``ddpctl up`` starts them), 2 workers each.

- every line a worker writes comes out whole, prefixed with its global rank, even when the worker writes
  it in pieces and all four ranks write at once;
- a worker that fails ends its node with one root-cause line (rank, exit code, last error line); the other
  node, whose workers only lost their peer, says so; no launcher tracebacks on either node;
- an agent that cannot reach the master's store is one line with the retryable exit code 128, without the
  C++ stack traces c10d writes to fd 2;
- a worker that writes terminal controls: its rank line passes them as written (the job's own output), the
  root-cause line shows them as escapes and stays short.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ddp_helpers import env
from ports import free_port

pytestmark = pytest.mark.distributed

PIECES = r"""
import os, sys, time, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
for i in range(15):
    # one line in three writes, the middle one after a pause: torchrun's tailer sees half lines
    os.write(1, f"line {i} of rank {r}: ".encode())
    time.sleep(0.03)
    os.write(1, b"middle, ")
    os.write(1, f"end {i}\n".encode())
    if i % 5 == 0:
        print(f"stderr {i} of rank {r}", file=sys.stderr, flush=True)
dist.barrier()
dist.destroy_process_group()
"""

FAIL_ON_3 = r"""
import time, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
print(f"hello from {r}", flush=True)
if r == 3:
    time.sleep(0.5)
    raise ValueError("boom on rank 3")
dist.barrier()
"""


def two_nodes(script: str, timeout: int = 180) -> list[subprocess.CompletedProcess]:
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-m", "ddp_train.launcher.run", "--nnodes", "2", "--nproc-per-node", "2",
                               "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", port,
                               "--no-python", sys.executable, "-c", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
             for node in (0, 1)]
    out = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=timeout)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


RANKED = re.compile(r"^rank-(\d+) \| (.*)$")


def test_every_worker_line_is_whole_and_carries_its_global_rank():
    nodes = two_nodes(PIECES)
    assert [n.returncode for n in nodes] == [0, 0], [n.stderr[-2000:] for n in nodes]
    for node, proc in enumerate(nodes):
        seen: dict[int, list[int]] = {}
        for line in proc.stdout.splitlines():
            m = RANKED.match(line)
            assert m, f"node {node}: line without a rank prefix: {line!r}"
            rank, text = int(m.group(1)), m.group(2)
            got = re.fullmatch(r"line (\d+) of rank (\d+): middle, end (\d+)", text)
            assert got, f"node {node}: torn or mixed line: {line!r}"
            assert int(got.group(2)) == rank and got.group(1) == got.group(3)
            seen.setdefault(rank, []).append(int(got.group(1)))
        assert sorted(seen) == [2 * node, 2 * node + 1]  # global ranks, not local ones
        assert all(v == list(range(15)) for v in seen.values())
        err_lines = [ln for ln in proc.stderr.splitlines() if RANKED.match(ln)]
        assert sorted(err_lines) == sorted(f"rank-{r} | stderr {i} of rank {r}" for r in seen for i in (0, 5, 10))


def test_a_failing_rank_ends_its_node_with_one_root_cause_line_and_no_launcher_traceback():
    node0, node1 = two_nodes(FAIL_ON_3)
    assert node1.returncode == 1 and node0.returncode != 0
    assert node1.stderr.splitlines()[-1] == "ddp-train-launch: rank 3 failed (exit code 1): ValueError: boom on rank 3"
    assert "rank-3 | ValueError: boom on rank 3" in node1.stderr.splitlines()  # the worker's own traceback stays
    last0 = node0.stderr.splitlines()[-1]
    assert re.match(r"ddp-train-launch: rank [01] failed \(exit code \d+(, killed by SIGTERM)?, lost a peer\): ",
                    last0), last0
    for proc in (node0, node1):
        launcher_lines = [ln for ln in proc.stderr.splitlines() if not RANKED.match(ln)]
        text = "\n".join(launcher_lines)
        assert "Traceback" not in text and "ChildFailedError" not in text and "failed (exitcode" not in text, text
        assert sum(ln.startswith("ddp-train-launch: ") for ln in launcher_lines) == 1, text


def test_an_unreachable_master_is_one_retryable_line_without_cpp_stack_traces():
    port = str(free_port())  # nobody listens there
    proc = subprocess.run([sys.executable, "-m", "ddp_train.launcher.run", "--nnodes", "2", "--nproc-per-node", "1",
                           "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", port,
                           "--rdzv-conf", "timeout=3", "--no-python", "true"],
                          capture_output=True, text=True, timeout=120, env=env())
    assert proc.returncode == 128, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("ddp-train-launch: error: DistNetworkError: ") and lines[-1].endswith("(exit code 128)")
    assert "frame #" not in proc.stderr and "Traceback" not in proc.stderr and "most recent call" not in proc.stderr
    assert any("[c10d]" in ln and "timed out" in ln for ln in lines)  # c10d's own one-line messages stay


EVIL = r"""
import sys
sys.stderr.write("\x1b]0;pwned\x07\x1b[2J" + "A" * 5000 + "\n")
sys.exit(3)
"""


def test_the_root_cause_line_escapes_a_ranks_terminal_controls_and_is_bounded():
    proc = subprocess.run([sys.executable, "-m", "ddp_train.launcher.run", "--standalone", "--nproc-per-node", "1",
                           "--no-python", sys.executable, "-c", EVIL],
                          capture_output=True, text=True, timeout=120, env=env())
    assert proc.returncode == 3, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert "rank-0 | \x1b]0;pwned\x07\x1b[2J" + "A" * 5000 in lines  # the rank's own line, as it wrote it
    assert "\x1b" not in lines[-1] and "\x07" not in lines[-1]
    assert lines[-1].startswith("ddp-train-launch: rank 0 failed (exit code 3): \\x1b]0;pwned\\x07\\x1b[2JAAA")
    assert len(lines[-1]) <= 400 and lines[-1].endswith("...")
