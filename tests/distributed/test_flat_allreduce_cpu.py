"""The flat all-reduce that graph mode uses instead of DDP (ddp_train.comm.flat_reduce), checked eagerly on a real
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

from ddp_helpers import leave_spawned_worker

pytestmark = pytest.mark.distributed


def _worker(rank, world, init_file, out_dir):
    from ddp_train.comm.flat_reduce import FlatAllReduce
    from ddp_train.model.networks import ToyCNN

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    results = {}
    for kind in ("ddp", "flat", "flat-bf16", "flat-deferred"):
        torch.manual_seed(100 + rank)  # different initial weights per rank: both must take rank 0's
        model = ToyCNN(3, 10).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        if kind == "ddp":
            net = nn.parallel.DistributedDataParallel(model)
            red = None
        else:
            bf16 = kind == "flat-bf16"
            # "step": rank 0's buffers broadcast before every forward, as DDP does; "deferred" (the default):
            # only when sync_buffers() is called, here before the last step (the state is read after it)
            net, red = model, FlatAllReduce(model, broadcast_buffers=True,
                                            comm_dtype=torch.bfloat16 if bf16 else torch.float32,
                                            buffer_sync="deferred" if kind == "flat-deferred" else "step")
            assert (red.comm is not None) == bf16
            assert all(p.grad.data_ptr() >= red.grad.data_ptr() for p in model.parameters())
            assert model.features[0][0].weight.grad.stride() == model.features[0][0].weight.stride()
        g = torch.Generator().manual_seed(7 + rank)  # each rank its own batches
        for step in range(4):
            x = torch.randn(8, 3, 16, 16, generator=g).contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 10, (8,), generator=g)
            if red is None:
                opt.zero_grad(set_to_none=True)
            else:
                if kind == "flat-deferred" and step == 3:
                    red.sync_buffers()
                red.zero_grad()
                red.pre_forward()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            if red is not None:
                # the backward's own gradient tensors (set_to_none, no accumulation into the zeroed buffer) ...
                lo, hi = red.grad.data_ptr(), red.grad.data_ptr() + red.grad.numel() * red.grad.element_size()
                assert not any(lo <= p.grad.data_ptr() < hi for p in model.parameters())
                red.all_reduce()
                # ... moved into it before the all-reduce: the optimizer reads views of the averaged buffer
                assert all(lo <= p.grad.data_ptr() < hi for p in model.parameters())
                assert model.features[0][0].weight.grad.stride() == model.features[0][0].weight.stride()
            opt.step()
        results[kind] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if kind == "flat-bf16":
            # the exchange itself: each rank's gradients rounded to bf16, averaged, copied back into the fp32 buffer
            gen = torch.Generator().manual_seed(11)
            mine = [torch.randn(red.grad.numel(), generator=gen) for _ in range(world)]
            red.grad.copy_(mine[rank])
            red.all_reduce()
            expect = sum(m.to(torch.bfloat16) for m in mine).div(world).float()
            results["exchange"] = (red.grad.clone(), expect)
    torch.save(results, os.path.join(out_dir, f"r{rank}.pt"))
    leave_spawned_worker()  # not a normal exit: gloo's threads may abort it (ddp_helpers)


def test_flat_all_reduce_matches_ddp(tmp_path):
    mp.spawn(_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = torch.load(tmp_path / "r0.pt"), torch.load(tmp_path / "r1.pt")
    for k in r0["ddp"]:
        # same as DDP on each rank (float sums in another order: within rounding); BatchNorm running stats
        # included: both broadcast rank 0's before each forward, then each rank updates them from its batch
        for r in (r0, r1):
            torch.testing.assert_close(r["flat"][k], r["ddp"][k], rtol=1e-5, atol=1e-6, msg=k)
            # the deferred broadcast, made before the last step only: the same state, bit for bit
            assert torch.equal(r["flat-deferred"][k], r["flat"][k]), k
        if "running" not in k and "num_batches" not in k:  # parameters: identical across ranks
            assert torch.equal(r0["flat"][k], r1["flat"][k]), k
            assert torch.equal(r0["flat-bf16"][k], r1["flat-bf16"][k]), k
        # gradients all-reduced in bf16 (--grad-compression bf16): within bf16 rounding of the fp32 all-reduce
        for r in (r0, r1):
            torch.testing.assert_close(r["flat-bf16"][k], r["flat"][k], rtol=0, atol=2e-2, msg=k)
    for r in (r0, r1):  # the bf16 exchange: the average of the bf16-rounded gradients, on every rank
        got, expect = r["exchange"]
        torch.testing.assert_close(got, expect, rtol=0, atol=0)
        assert not torch.equal(got, r0["exchange"][1].new_zeros(1).expand_as(got))
