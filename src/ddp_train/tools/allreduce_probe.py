"""All-reduce interconnect probe: bus bandwidth over message sizes, the nccl-tests way.

Run one process per GPU under torchrun (``torchrun --nproc-per-node 2 -m ddp_train.tools.allreduce_probe``);
with no GPU it uses gloo on the CPU (and a smaller largest size). For each message size it times
``iters`` in-place sum all-reduces after a warm-up, takes the slowest rank's mean, and reports

- ``algbw = bytes / time`` and ``busbw = algbw * 2(n-1)/n`` in GB/s (1 GB = 1e9 bytes, as nccl-tests);
- a correctness check (every rank contributes rank+1; the sum must be n(n+1)/2 everywhere).

Rank 0's last stdout line is one JSON object ``{"event": "allreduce_probe", ...}`` (also written to
``--output`` when given). Exit codes: 2 bad arguments, 4 wrong all-reduce result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_bytes(text: str) -> int:
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = t[-1] if t and t[-1] in "kmg" else ""
    try:
        value = int(float(t[: len(t) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 4K, 16M, 1G)") from None
    if value < 4:
        raise argparse.ArgumentTypeError(f"size must be at least 4 bytes, got {text!r}")
    return value


def sizes(min_bytes: int, max_bytes: int, factor: int, elem: int) -> list[int]:
    """Geometric sizes from min to max (max always included), rounded down to whole elements."""
    out, s = [], min_bytes
    while s < max_bytes:
        out.append(s - s % elem)
        s *= factor
    out.append(max_bytes - max_bytes % elem)
    return sorted({x for x in out if x >= elem})


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ddp_train.tools.allreduce_probe",
        description="Measure all-reduce algbw/busbw over message sizes (run under torchrun).",
        epilog="example: torchrun --standalone --nproc-per-node 2 -m ddp_train.tools.allreduce_probe --max-bytes 1G",
    )
    p.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("8K"))
    p.add_argument("--max-bytes", type=parse_bytes, default=None,
                   help="largest message (default 1G on GPU, 16M on CPU)")
    p.add_argument("--factor", type=int, default=4, help="size step factor (default 4)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up all-reduces per size")
    p.add_argument("--iters", type=int, default=20, help="most timed all-reduces per size")
    p.add_argument("--size-budget-s", type=float, default=1.0,
                   help="time budget per size; fewer iterations for large sizes on slow links")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--output", default=None, help="also write the JSON result to this file (rank 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.factor < 2 or args.iters < 1 or args.warmup < 0:
        print("allreduce_probe: --factor must be >= 2, --iters >= 1, --warmup >= 0", file=sys.stderr)
        return 2
    if "WORLD_SIZE" not in os.environ:
        print("allreduce_probe: run under torchrun, e.g. torchrun --standalone --nproc-per-node 2 "
              "-m ddp_train.tools.allreduce_probe", file=sys.stderr)
        return 2

    from ddp_train.runtime.startup import import_modules

    import_modules("torch", "torch.distributed")  # with the collector paused (startup.py)
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if backend == "nccl":
        from ddp_train.comm.socket_transport import apply as apply_socket_rule

        apply_socket_rule()  # DDP_TRAIN_NCCL_SOCKETS=auto: ddp-train's NCCL socket settings (socket_transport.py)
        dist.init_process_group(backend, device_id=device)
    else:
        dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = getattr(torch, args.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    max_bytes = args.max_bytes or ((1 << 30) if device.type == "cuda" else (16 << 20))

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    results = []
    correct = True
    buf = torch.zeros(max_bytes // elem, dtype=dtype, device=device)
    for nbytes in sizes(args.min_bytes, max_bytes, args.factor, elem):
        t = buf[: nbytes // elem]
        t.zero_()  # sums of zeros stay zero: timing is value-independent, nothing overflows
        for _ in range(args.warmup):
            dist.all_reduce(t)
        # One timed op to size the loop; rank 0 decides so every rank runs the same count.
        sync()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        sync()
        one = time.perf_counter() - t0
        plan = torch.tensor([max(1, min(args.iters, int(args.size_budget_s / max(one, 1e-7))))],
                            dtype=torch.int64, device=device)
        dist.broadcast(plan, 0)
        iters = int(plan.item())
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        sync()
        mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=device)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)  # the collective is as slow as its slowest rank
        seconds = float(mean.item())
        # Correctness on this size: rank r contributes r+1.
        t.fill_(rank + 1)
        dist.all_reduce(t)
        expected = n * (n + 1) / 2
        ok = bool(torch.all(t == expected).item())
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        correct = correct and bool(flag.item())
        alg = nbytes / seconds / 1e9
        results.append({"bytes": nbytes, "iters": iters, "time_us": seconds * 1e6,
                        "algbw_gbps": alg, "busbw_gbps": alg * 2 * (n - 1) / n})
        if rank == 0:
            print(f"allreduce {nbytes:>12d} B  {seconds * 1e6:10.1f} us  algbw {alg:8.2f} GB/s  "
                  f"busbw {alg * 2 * (n - 1) / n:8.2f} GB/s", flush=True)
    summary = {
        "event": "allreduce_probe",
        "world_size": n,
        "backend": backend,
        "device": device.type,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "nccl": _nccl_version(torch) if backend == "nccl" else None,
        "correct": correct,
        "results": results,
        "peak_busbw_gbps": max(r["busbw_gbps"] for r in results),
        "max_bytes": results[-1]["bytes"],
        "busbw_at_max_gbps": results[-1]["busbw_gbps"],
    }
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        line = json.dumps(summary)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(line + "\n")
        print(line, flush=True)
    return 0 if correct else 4


def _nccl_version(torch) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a build without NCCL
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


if __name__ == "__main__":
    sys.exit(main())
