"""The bucketed all-reduce of graph mode (``--graph-reducer bucketed``, ddp_train.comm.flat_reduce.BucketedAllReduce),
checked eagerly on real 2-process gloo groups: its gradients after one step are DDP's and the flat reducer's,
with parameters of several sizes, one parameter never used in the forward and one used on rank 0 only; buckets
go out in bucket order on every rank, some during the backward; and ddp-train's training loop through it
(hidden ``--debug-reducer-in-eager``: graph mode's reducer in eager steps, since the CUDA graph needs a GPU)
gives the flat reducer's loss curve. The capture itself runs on a GPU only (tests/distributed/
test_ddp_train_gpu.py, benchmarks/device_report.py)."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from ddp_helpers import TOY, leave_spawned_worker, ok, summary, torchrun

pytestmark = pytest.mark.distributed


class Mixed(nn.Module):
    """Parameters of several sizes (a 1x1 conv of 32 weights up to a 4,096-weight linear layer, biases, BatchNorm),
    one layer never called (``unused``, in the middle of the parameter order) and one called on rank 0 only."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 2, 1)
        self.unused = nn.Linear(7, 3)
        self.fc1 = nn.Linear(2 * 8 * 8, 32)
        self.only_rank0 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x, rank0=False):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x)).flatten(1)
        x = torch.relu(self.fc1(x))
        if rank0:
            x = x + self.only_rank0(x)
        return self.fc2(x)


def _grads(model):
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
            for n, p in model.named_parameters()}


def _worker(rank, world, init_file, out_dir):
    from ddp_train.comm.bucket_reduce import BucketedAllReduce
    from ddp_train.comm.flat_reduce import FlatAllReduce

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    res = {}
    kinds = ("ddp", "flat", "b-1", "b-4k", "b-25m", "b-4k-bf16")
    for kind in kinds:
        torch.manual_seed(100 + rank)  # different initial weights per rank: every kind must take rank 0's
        model = Mixed().to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        red = None
        if kind == "ddp":
            net = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
        elif kind == "flat":
            net, red = model, FlatAllReduce(model)
        else:
            size = {"1": 1, "4k": 4096, "25m": 25 << 20}[kind.split("-")[1]]
            net = model
            red = BucketedAllReduce(model, bucket_bytes=size,
                                    comm_dtype=torch.bfloat16 if kind.endswith("bf16") else torch.float32)
        g = torch.Generator().manual_seed(7 + rank)  # each rank its own batches
        losses, info = [], {}
        for step in range(5):
            x = torch.randn(8, 3, 8, 8, generator=g).contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 10, (8,), generator=g)
            if red is None:
                opt.zero_grad(set_to_none=True)
            else:
                red.zero_grad()
                red.pre_forward()
            if kind == "b-4k-bf16" and step == 0:  # this rank's own gradients, from a twin of the model
                twin = Mixed().to(memory_format=torch.channels_last)
                twin.load_state_dict(model.state_dict())
                nn.functional.cross_entropy(twin(x, rank0=rank == 0), y).backward()
                res[f"{kind}/local"] = _grads(twin)
            loss = nn.functional.cross_entropy(net(x, rank0=rank == 0), y)
            loss.backward()
            if isinstance(red, BucketedAllReduce):
                in_backward = list(red.launched)
            if red is not None:
                red.all_reduce()
            if step == 0:
                res[f"{kind}/grads"] = _grads(model)
                if isinstance(red, BucketedAllReduce):
                    info = dict(buckets=len(red.bounds), launched=list(red.launched), in_backward=in_backward,
                                unready=list(red.unready), bounds=list(red.bounds))
            opt.step()
            t = loss.detach().reshape(1)
            dist.all_reduce(t)
            losses.append(float(t) / world)
        res[f"{kind}/losses"] = losses
        res[f"{kind}/state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        res[f"{kind}/info"] = info
        if isinstance(red, BucketedAllReduce):
            red.remove()
    # one parameter's gradient accumulated twice before all_reduce(): refused in one line
    model = Mixed()
    red = BucketedAllReduce(model, bucket_bytes=1)
    red.zero_grad()
    x = torch.randn(2, 3, 8, 8)
    model(x).sum().backward()
    try:
        model(x).sum().backward()
        res["twice"] = None
    except RuntimeError as exc:
        res["twice"] = str(exc)
    torch.save(res, os.path.join(out_dir, f"r{rank}.pt"))
    leave_spawned_worker()  # not a normal exit: gloo's threads may abort it (ddp_helpers)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("bucketed")
    mp.spawn(_worker, args=(2, str(d / "init"), str(d)), nprocs=2, join=True)
    return torch.load(d / "r0.pt"), torch.load(d / "r1.pt")


def test_gradients_after_one_step_equal_ddp_and_flat(results):
    for r in results:
        for kind in ("flat", "b-1", "b-4k", "b-25m"):
            for name, g in r["ddp/grads"].items():
                torch.testing.assert_close(r[f"{kind}/grads"][name], g, rtol=1e-5, atol=1e-7, msg=f"{kind} {name}")
        # the layer rank 1 never calls still gets rank 0's gradient, averaged with rank 1's zeros, as under DDP
        assert r["b-4k/grads"]["only_rank0.weight"].abs().sum() > 0
        assert r["b-4k/grads"]["unused.weight"].abs().sum() == 0
    r0, r1 = results
    for name in r0["b-4k/grads"]:  # identical on both ranks
        assert torch.equal(r0["b-4k/grads"][name], r1["b-4k/grads"][name]), name


def test_loss_and_parameters_over_steps_match_the_flat_reducer(results):
    for r in results:
        for kind in ("b-1", "b-4k", "b-25m"):
            assert r[f"{kind}/losses"] == pytest.approx(r["flat/losses"], rel=1e-5, abs=1e-6), kind
            for k, v in r["flat/state"].items():
                torch.testing.assert_close(r[f"{kind}/state"][k], v, rtol=1e-5, atol=1e-6, msg=f"{kind} {k}")
        assert r["ddp/losses"] == pytest.approx(r["flat/losses"], rel=1e-5, abs=1e-6)
        # bf16 on the wire: within bf16 rounding of the fp32 exchange
        assert r["b-4k-bf16/losses"] == pytest.approx(r["flat/losses"], rel=2e-2, abs=2e-2)
    r0, r1 = results
    for k, v in r0["b-4k/state"].items():
        if "running" not in k and "num_batches" not in k:  # parameters: identical across ranks
            assert torch.equal(v, r1["b-4k/state"][k]), k


def test_buckets_in_order_some_during_the_backward(results):
    r0, r1 = results
    n_params = len(r0["ddp/grads"])
    one, mid, big = (r0[f"b-{s}/info"] for s in ("1", "4k", "25m"))
    assert one["buckets"] == n_params and big["buckets"] == 1 and 1 < mid["buckets"] < n_params
    for r in results:
        for s in ("1", "4k", "25m"):
            info = r[f"b-{s}/info"]
            # every rank launches every bucket once, in bucket order, whatever order its hooks fired in
            assert info["launched"] == list(range(info["buckets"]))
            assert info["bounds"][0][0] == 0 and all(a[1] == b[0] for a, b in zip(info["bounds"], info["bounds"][1:], strict=False))
    # the buckets before the never-used layer (reverse order: fc2, only_rank0, fc1) go out during the backward on
    # rank 0; on rank 1 the first bucket holds only_rank0 (one bucket per parameter), which it never computes
    assert r0["b-1/info"]["in_backward"] == [0, 1, 2, 3, 4, 5]
    assert r1["b-1/info"]["in_backward"] == [0, 1]
    assert r0["b-1/info"]["unready"] == ["unused.bias", "unused.weight"]
    assert r1["b-1/info"]["unready"] == ["only_rank0.bias", "only_rank0.weight", "unused.bias", "unused.weight"]
    assert r0["b-25m/info"]["in_backward"] == []  # one bucket: it waits for the unused layer, so after the backward


def test_a_second_backward_before_all_reduce_is_refused(results):
    for r in results:
        assert r["twice"] and "second gradient" in r["twice"] and "\n" not in r["twice"]


def _losses(path):
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    return [r["loss"] for r in rows if r["event"] == "step"]


def test_training_loop_through_the_bucketed_reducer_matches_flat(tmp_path):
    """ddp-train on 2 gloo ranks with graph mode's reducers in eager steps: bucketed (several buckets) and flat
    give the same loss at every logged step, the sync check passes, and DDP's curve is the same within rounding."""
    base = TOY + ["--log-interval", "2", "--no-eval"]
    curves = {}
    for kind, extra in (("flat", ["--graph-reducer", "flat", "--debug-reducer-in-eager"]),
                        ("bucketed", ["--graph-reducer", "bucketed", "--bucket-mb", "0.01", "--debug-reducer-in-eager"]),
                        ("ddp", [])):
        m = tmp_path / f"{kind}.jsonl"
        s = summary(ok(torchrun(2, base + extra + ["--metrics-file", str(m)])[0]))
        assert s["sync_check"] == "pass" and s["step_mode"] == "eager"
        assert s["graph_reducer"] == (None if kind == "ddp" else kind)
        if kind == "bucketed":
            assert s["graph_buckets"] > 2, s["graph_buckets"]
        curves[kind] = _losses(m)
    assert len(curves["flat"]) >= 4
    assert curves["bucketed"] == pytest.approx(curves["flat"], abs=2e-4)
    assert curves["ddp"] == pytest.approx(curves["flat"], abs=2e-4)


def test_bf16_buckets_are_the_average_of_the_bf16_rounded_gradients(results):
    """Each rank's gradients cast straight into the bf16 buckets, summed, halved and cast back: every parameter's
    gradient is exactly (bf16(g0) + bf16(g1)) / 2 of the two ranks' own gradients (the unused layer's zeros and
    the rank-0-only layer's half included), in the parameter's own strides, on both ranks."""
    r0, r1 = results
    local0, local1 = r0["b-4k-bf16/local"], r1["b-4k-bf16/local"]
    for name, g0 in local0.items():
        expect = ((g0.to(torch.bfloat16) + local1[name].to(torch.bfloat16)) / 2).float()
        for r in (r0, r1):
            got = r["b-4k-bf16/grads"][name]
            assert torch.equal(got, expect), name
            assert got.stride() == expect.stride() or got.is_contiguous(memory_format=torch.channels_last), name
    assert not torch.equal(local0["fc2.weight"], local1["fc2.weight"])  # the ranks' batches differ
