"""The flat all-reduce that graph mode uses instead of DDP (ddp_train.flatreduce), checked eagerly on a real
2-process gloo group: the same steps through it and through DistributedDataParallel give the same parameters
and the same (broadcast) BatchNorm statistics. The CUDA-graph capture itself needs a GPU
(tests/distributed/test_ddp_train_gpu.py)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

pytestmark = pytest.mark.distributed


def _worker(rank, world, init_file, out_dir):
    from ddp_train.flatreduce import FlatAllReduce
    from ddp_train.models import ToyCNN

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    results = {}
    for kind in ("ddp", "flat"):
        torch.manual_seed(100 + rank)  # different initial weights per rank: both must take rank 0's
        model = ToyCNN(3, 10).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        if kind == "ddp":
            net = nn.parallel.DistributedDataParallel(model)
            red = None
        else:
            net, red = model, FlatAllReduce(model, broadcast_buffers=True)
            assert all(p.grad.data_ptr() >= red.grad.data_ptr() for p in model.parameters())
            assert model.features[0][0].weight.grad.stride() == model.features[0][0].weight.stride()
        g = torch.Generator().manual_seed(7 + rank)  # each rank its own batches
        for _ in range(4):
            x = torch.randn(8, 3, 16, 16, generator=g).contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 10, (8,), generator=g)
            if red is None:
                opt.zero_grad(set_to_none=True)
            else:
                red.zero_grad()
                red.pre_forward()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            if red is not None:
                red.all_reduce()
            opt.step()
        results[kind] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.save(results, os.path.join(out_dir, f"r{rank}.pt"))
    dist.destroy_process_group()


def test_flat_all_reduce_matches_ddp(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = torch.load(tmp_path / "r0.pt"), torch.load(tmp_path / "r1.pt")
    for k in r0["ddp"]:
        # same as DDP on each rank (float sums in another order: within rounding); BatchNorm running stats
        # included: both broadcast rank 0's before each forward, then each rank updates them from its batch
        for r in (r0, r1):
            torch.testing.assert_close(r["flat"][k], r["ddp"][k], rtol=1e-5, atol=1e-6, msg=k)
        if "running" not in k and "num_batches" not in k:  # parameters: identical across ranks
            assert torch.equal(r0["flat"][k], r1["flat"][k]), k
