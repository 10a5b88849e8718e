"""ddp-train's process group in its rendezvous round's own namespace of torchrun's shared agent store
(ddp_train/runtime/round_store.py says why), on a real TCPStore and real gloo process groups in separate processes.

Round 0: two ranks open a process group, reduce, and are killed (as the survivor's workers are when a peer is
lost), leaving their keys (each rank's gloo address) in the store, as the workers of a round that ended do in the
agent's store. Round 1: rank 1 starts first and rank 0 only after it
has had time to read: under env:// rank 1 would read round 0's rank-0 address, connect to a port nobody holds any
more and fail ("Connection refused"); in round 1's namespace it waits for the new address and the group forms."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch.distributed as dist

from ddp_train.runtime import distributed as d
from ddp_train.runtime import round_store

SRC = str(Path(__file__).resolve().parents[2] / "src")

RANK = r"""
import argparse, sys
import torch, torch.distributed as dist
from ddp_train.runtime import distributed as d
args = argparse.Namespace(init_method=None, rank=None, world_size=None, local_rank=None, connect_timeout=20,
                          pg_timeout=30)
launch = d.detect(args)
d.init(args, launch, "gloo", torch.device("cpu"))
t = torch.tensor([float(launch.rank + 1)])
dist.all_reduce(t)
print(f"rank {launch.rank} round {sys.argv[1]} sum {t.item():g}", flush=True)
if sys.argv[2] == "killed":  # a worker of a round that ends by a lost peer: killed in its group, no clean exit
    import time
    time.sleep(600)
import os
os._exit(0)  # as ddp-train leaves a joined group (its __main__._exit): gloo's threads abort a normal exit now and then
"""


def _rank(port: int, rank: int, number: int, end: str = "exit"):
    env = {**os.environ, "PYTHONPATH": SRC, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": "round-store-test",
           "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_USE_AGENT_STORE": "True",
           round_store.ROUND_ENV: str(number)}
    return subprocess.Popen([sys.executable, "-c", RANK, str(number), end], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(p, what: str) -> str:
    try:
        out, _ = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        pytest.fail(f"{what} did not finish within 90 s:\n{out}")
    assert p.returncode == 0, f"{what} exited {p.returncode}:\n{out}"
    return out


def test_a_later_round_never_reads_an_earlier_rounds_keys():
    # the agent's shared store: it outlives the workers of every round
    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=60), wait_for_workers=False)
    first = [_rank(agent.port, r, 0, "killed") for r in (0, 1)]
    for r, p in enumerate(first):
        line = p.stdout.readline()  # the group formed and reduced; then the round ends by SIGKILL
        assert f"rank {r} round 0 sum 3" in line, line + p.stdout.read() if p.poll() is not None else line
    for p in first:
        p.kill()
        p.communicate(timeout=30)
    late = _rank(agent.port, 1, 1)
    time.sleep(4)  # rank 1 of round 1 is up, looking for rank 0's address, long before rank 0 starts
    assert late.poll() is None, late.communicate()[0]
    zero = _rank(agent.port, 0, 1)
    assert "rank 0 round 1 sum 3" in _finish(zero, "round 1 rank 0")
    assert "rank 1 round 1 sum 3" in _finish(late, "round 1 rank 1")


class _Holder:
    def __init__(self, number):
        self.state = type("State", (), {"round": number})()


def test_the_agent_exports_the_round_it_joined(monkeypatch):
    monkeypatch.delenv(round_store.ROUND_ENV, raising=False)
    handler = type("Handler", (), {})()
    handler._state_holder = _Holder(7)
    round_store.export_round(handler)
    assert os.environ[round_store.ROUND_ENV] == "7"
    handler._state_holder = _Holder(None)  # a torch that keeps the round elsewhere: no stale number stays
    round_store.export_round(handler)
    assert round_store.ROUND_ENV not in os.environ


def test_without_the_agent_store_or_a_round_the_group_opens_from_env(monkeypatch):
    launch = d.Launch("torchrun", 0, 2, 0, "env://", ("127.0.0.1", 1))
    monkeypatch.setenv(round_store.ROUND_ENV, "3")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")  # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: a new store
    assert d.round_store(launch, timedelta(seconds=1)) is None
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.delenv(round_store.ROUND_ENV)  # plain torchrun, not ddp-train-launch
    assert d.round_store(launch, timedelta(seconds=1)) is None
    monkeypatch.setenv(round_store.ROUND_ENV, "3")
    assert d.round_store(d.Launch("env", 0, 2, 0, "env://", ("127.0.0.1", 1)), timedelta(seconds=1)) is None
