"""All-reduce of ResNet-18's gradient bytes (11,173,962 values) on the GPUs of one host, as the training step
issues it: NCCL in fp32 and bf16, eager and inside a CUDA graph, a one-value all-reduce (the synchronisation
alone), and torch's symmetric-memory two-shot all-reduce (peer loads over NVLink, no multicast) where it runs.

    torchrun --standalone --nproc-per-node 4 allreduce_probe.py [--out FILE]

Times are medians over CUDA events (graph rows: one replay of 20 all-reduces, divided by 20)."""

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

N = 11_173_962


def timed(fn, iters=30, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def in_graph(op, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        for _ in range(reps):
            op()
    return lambda: g.replay(), reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    rows = {}
    for dtype in (torch.float32, torch.bfloat16):
        t = torch.randn(N, device="cuda", dtype=dtype)
        name = str(dtype).split(".")[1]
        rows[f"nccl {name} eager"] = timed(lambda: dist.all_reduce(t, op=dist.ReduceOp.AVG))
        fn, reps = in_graph(lambda: dist.all_reduce(t, op=dist.ReduceOp.AVG))
        rows[f"nccl {name} graph"] = timed(fn, iters=10) / reps
    one = torch.ones(1, device="cuda")
    rows["nccl one value eager"] = timed(lambda: dist.all_reduce(one))
    fn, reps = in_graph(lambda: dist.all_reduce(one))
    rows["nccl one value graph"] = timed(fn, iters=10) / reps
    f32 = torch.randn(N, device="cuda")
    cast = torch.empty(N, device="cuda", dtype=torch.bfloat16)
    rows["cast fp32->bf16->fp32 (two copies)"] = timed(lambda: (cast.copy_(f32), f32.copy_(cast)))
    try:
        import torch.distributed._symmetric_memory as symm_mem

        group = dist.group.WORLD
        for dtype in (torch.float32, torch.bfloat16):
            buf = symm_mem.empty(N, dtype=dtype, device="cuda")
            buf.normal_()
            symm_mem.rendezvous(buf, group.group_name)
            name = str(dtype).split(".")[1]
            op = lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group.group_name)  # noqa: E731
            rows[f"symm-mem two-shot {name} eager"] = timed(op)
            try:
                fn, reps = in_graph(op)
                rows[f"symm-mem two-shot {name} graph"] = timed(fn, iters=10) / reps
            except Exception as exc:  # noqa: BLE001
                rows[f"symm-mem two-shot {name} graph"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    except Exception as exc:  # noqa: BLE001
        rows["symm-mem"] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
    if rank == 0:
        env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "TORCH_NCCL"))}
        print(json.dumps({"world_size": dist.get_world_size(), "env": env, "us": rows}, indent=1))
        if a.out:
            with open(a.out, "w") as fh:
                json.dump({"world_size": dist.get_world_size(), "env": env, "us": rows}, fh, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
