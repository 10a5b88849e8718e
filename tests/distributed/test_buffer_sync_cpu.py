"""Graph mode's reducers broadcast rank 0's BatchNorm buffers only before the steps whose buffers are read
afterwards (``buffer_sync="deferred"``, ddp_train.comm.flat_reduce), not before every forward as DDP does
(``buffer_sync="step"``). On real 2-process gloo groups, with different batches per rank: at every read point
every rank holds bit for bit the buffers (and parameters) of the per-step broadcast, while dropping the broadcast
altogether leaves other buffers on rank 1 (so these tests can tell); and ddp-train's loop through the reducers
(hidden ``--debug-reducer-in-eager``, since the CUDA graph needs a GPU) evaluates, checks and checkpoints exactly
what the per-step broadcast (hidden ``--debug-per-step-buffer-broadcast``) does."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from ddp_helpers import TOY, leave_spawned_worker, ok, run, summary, torchrun

pytestmark = pytest.mark.distributed

STEPS = 7
READS = (3, 7)  # steps after which the test reads every rank's buffers (as evaluation or a sync check would)


class Net(nn.Module):
    """Two BatchNorms: the default exponential average, and momentum=None (the cumulative average)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8, momentum=None)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean((2, 3)))


def _worker(rank, world, init_file, out_dir):
    from ddp_train.comm.bucket_reduce import BucketedAllReduce
    from ddp_train.comm.flat_reduce import FlatAllReduce

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    res = {}
    probe = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(3))  # the same eval input everywhere
    for cls in (FlatAllReduce, BucketedAllReduce):
        for mode in ("step", "deferred", "dropped"):
            torch.manual_seed(100 + rank)  # different initial weights and buffers per rank: all take rank 0's
            model = Net()
            with torch.no_grad():
                for m in (model.bn1, model.bn2):
                    m.running_mean.normal_()
                    m.running_var.uniform_(0.5, 2.0)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            kw = {"bucket_bytes": 512} if cls is BucketedAllReduce else {}
            red = cls(model, buffer_sync="step" if mode == "step" else "deferred", **kw)
            assert red.deferred == (mode != "step")
            g = torch.Generator().manual_seed(7 + rank)  # each rank its own batches
            for step in range(1, STEPS + 1):
                x = torch.randn(6, 3, 8, 8, generator=g) * (1 + rank)
                y = torch.randint(0, 10, (6,), generator=g)
                if mode == "deferred" and step in READS:
                    red.sync_buffers()  # what the training loop does before a step that a read follows
                red.zero_grad()
                red.pre_forward()
                nn.functional.cross_entropy(model(x), y).backward()
                red.all_reduce()
                opt.step()
                if step in READS:
                    model.eval()
                    with torch.no_grad():
                        logits = model(probe)
                    model.train()
                    res[f"{cls.__name__}/{mode}/{step}"] = (
                        {k: v.detach().clone() for k, v in model.state_dict().items()}, logits)
            if isinstance(red, BucketedAllReduce):
                red.remove()
    torch.save(res, os.path.join(out_dir, f"r{rank}.pt"))
    leave_spawned_worker()  # not a normal exit: gloo's threads may abort it (ddp_helpers)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("bufsync")
    mp.spawn(_worker, args=(2, str(d / "init"), str(d)), nprocs=2, join=True)
    return torch.load(d / "r0.pt"), torch.load(d / "r1.pt")


BN = ("running_mean", "running_var", "num_batches_tracked")


@pytest.mark.parametrize("cls", ["FlatAllReduce", "BucketedAllReduce"])
def test_deferred_broadcast_leaves_the_per_step_values_at_every_read(results, cls):
    r0, r1 = results
    for step in READS:
        for r in (r0, r1):
            want, want_logits = r[f"{cls}/step/{step}"]
            got, got_logits = r[f"{cls}/deferred/{step}"]
            for k in want:  # parameters and buffers, bit for bit
                assert torch.equal(got[k], want[k]), (step, k)
            assert torch.equal(got_logits, want_logits), step  # what an evaluation on this rank computes
        for k, v in r0[f"{cls}/deferred/{step}"][0].items():
            if not k.endswith(BN):  # parameters: the same on both ranks
                assert torch.equal(v, r1[f"{cls}/deferred/{step}"][0][k]), k
        # under both, rank 1's statistics are rank 0's from before the step updated with rank 1's own batch
        assert not torch.equal(r0[f"{cls}/step/{step}"][0]["bn1.running_mean"],
                               r1[f"{cls}/step/{step}"][0]["bn1.running_mean"])


@pytest.mark.parametrize("cls", ["FlatAllReduce", "BucketedAllReduce"])
def test_without_the_broadcast_rank_1_reads_other_buffers(results, cls):
    """The negative control: no sync_buffers() before the read steps (the broadcast simply dropped). Rank 0's
    state is unchanged (it never depends on the broadcast); rank 1's statistics and its evaluation differ."""
    r0, r1 = results
    for step in READS:
        want, _ = r0[f"{cls}/step/{step}"]
        got, _ = r0[f"{cls}/dropped/{step}"]
        for k in want:
            assert torch.equal(got[k], want[k]), (step, k)
        want, want_logits = r1[f"{cls}/step/{step}"]
        got, got_logits = r1[f"{cls}/dropped/{step}"]
        for k in ("bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"):
            assert not torch.equal(got[k], want[k]), (step, k)
        assert not torch.equal(got_logits, want_logits), step
        for k in want:
            if not k.endswith(BN):
                assert torch.equal(got[k], want[k]), (step, k)


# --- ddp-train's loop through the reducers ---------------------------------------------------------------------

BASE = TOY + ["--deterministic", "--log-interval", "4", "--sync-check-every", "3", "--debug-reducer-in-eager"]


def _train(tmp_path, name, extra):
    out = tmp_path / name
    s = summary(ok(torchrun(2, BASE + extra + ["--output-dir", str(out)])[0]))
    rows = [json.loads(ln) for ln in open(out / "metrics.jsonl") if ln.strip()]
    evals = [(r["test_acc"], r["test_loss"]) for r in rows if r["event"] == "epoch"]
    checks = [(r["step"], r["result"], r["bn_stats_drift"], r["mismatched"]) for r in rows
              if r["event"] == "sync_check"]
    model = torch.load(out / "ckpt-00000016.pt", map_location="cpu", weights_only=False)["model"]
    return s, evals, checks, model


@pytest.mark.parametrize("reducer", [["--graph-reducer", "flat"],
                                     ["--graph-reducer", "bucketed", "--bucket-mb", "0.01"]],
                         ids=["flat", "bucketed"])
def test_training_loop_reads_what_the_per_step_broadcast_gives(tmp_path, reducer):
    """2 epochs of 8 steps, a sync check every 3 steps and at the end, an evaluation after each epoch, and a
    checkpoint after each: the deferred broadcast and the per-step one give the same evaluations (unrounded, from
    the metrics file), the same sync-check results (BatchNorm drift included: rank 1's last batch) and the same
    final checkpoint; without any broadcast the evaluations differ (rank 1 evaluates with its own statistics)."""
    s_def, ev_def, ck_def, m_def = _train(tmp_path, "deferred", reducer)
    s_step, ev_step, ck_step, m_step = _train(tmp_path, "step", reducer + ["--debug-per-step-buffer-broadcast"])
    for s in (s_def, s_step):
        assert s["sync_check"] == "pass" and s["step_mode"] == "eager" and s["steps"] == 16
        assert s["graph_reducer"] == reducer[1]
    assert len(ev_def) == 2 and ev_def == ev_step
    assert [c[0] for c in ck_def] == [3, 6, 9, 12, 15, 16] and ck_def == ck_step
    assert all(c[2] for c in ck_def)  # the drift of rank 1's own last batch, as under the per-step broadcast
    assert s_def["final_accuracy"] == s_step["final_accuracy"] and s_def["final_loss"] == s_step["final_loss"]
    assert m_def.keys() == m_step.keys()
    for k in m_def:
        assert torch.equal(m_def[k], m_step[k]), k
    if reducer[1] == "flat":  # the negative control, once
        s_none, ev_none, ck_none, m_none = _train(tmp_path, "none", reducer + ["--no-broadcast-buffers"])
        assert s_none["sync_check"] == "pass"
        assert ev_none[0] != ev_step[0] and ev_none[1] != ev_step[1]
        for k in m_def:  # rank 0's own model never depends on the broadcast: the checkpoint is the same
            assert torch.equal(m_none[k], m_step[k]), k


def test_per_step_broadcast_hook_needs_the_reducer():
    p = run(TOY + ["--epochs", "1", "--debug-per-step-buffer-broadcast"])
    assert p.returncode == 2 and "--debug-per-step-buffer-broadcast applies to graph mode" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_sync_bn_through_the_reducer_keeps_bn_stats_identical():
    """--sync-bn (every rank normalises with the global batch statistics, so its running statistics are the same
    everywhere): through graph mode's reducer with the deferred broadcast the sync check, which then counts any
    BatchNorm difference as a mismatch, passes with no drift."""
    s = summary(ok(torchrun(2, TOY + ["--epochs", "1", "--sync-bn", "--sync-check-every", "3",
                                      "--debug-reducer-in-eager"])[0]))
    assert s["sync_check"] == "pass" and s["bn_stats_drift"] == 0 and s["sync_bn"] is True
    assert s["graph_reducer"] == "flat"
