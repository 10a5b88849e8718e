"""Host time ddp-train's stop control costs per training step (the async flag all-reduce, ddp_train.loop.preempt).

Starts WORLD processes on this machine (gloo, tcp://127.0.0.1), each alternating a stand-in for a training
step (a sleep of --step-ms, then a blocking all-reduce of --grad-kb on the default group: DDP's gradient sync,
which keeps the ranks in step; --no-sync leaves it out) with StopControl.poll(), and reports the host time spent
inside poll() per step (mean and 99th percentile over --steps steps, the worst rank). Usage:

    .venv/bin/python benchmarks/stop_control.py [--world 2] [--steps 2000] [--step-ms 2] [--no-sync]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time


def _worker(rank, world, port, steps, step_s, grad_kb, out):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist

    from ddp_train.loop import preempt

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    c = preempt.StopControl(distributed=True, rank=rank, interval_s=3600)
    spent = []
    grad = torch.ones(max(1, grad_kb * 256))
    for _ in range(steps):
        time.sleep(step_s)
        if grad_kb:
            dist.all_reduce(grad)
        t0 = time.perf_counter()
        d = c.poll()
        spent.append(time.perf_counter() - t0)
        assert d.stop is None and not d.save
    c.drain()
    dist.barrier()
    spent.sort()
    out.put({"rank": rank, "mean_us": 1e6 * sum(spent) / len(spent), "p99_us": 1e6 * spent[int(0.99 * len(spent))]})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--step-ms", type=float, default=2.0)
    p.add_argument("--grad-kb", type=int, default=64)
    p.add_argument("--no-sync", action="store_true")
    a = p.parse_args()
    import multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, a.world, port, a.steps, a.step_ms / 1000,
                                                                0 if a.no_sync else a.grad_kb, q)) for r in range(a.world)]
    for pr in procs:
        pr.start()
    res = [q.get(timeout=600) for _ in procs]
    for pr in procs:
        pr.join()
    worst = max(res, key=lambda r: r["mean_us"])
    print(json.dumps({"world": a.world, "steps": a.steps, "step_ms": a.step_ms, "sync": not a.no_sync,
                      "poll_mean_us": round(worst["mean_us"], 1), "poll_p99_us": round(worst["p99_us"], 1),
                      "ranks": res}))


if __name__ == "__main__":
    main()
