"""Helpers for the ddp-train tests: real processes, real gloo/nccl process groups on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from ports import free_port
from procs import drain

# Small and fast: the whole distributed suite runs on 2 shared cores.
TOY = ["--workload", "toy", "--train-size", "512", "--test-size", "256", "--batch-size", "32", "--epochs", "2"]


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"})
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(args, timeout=120, **env_extra) -> subprocess.CompletedProcess:
    """One plain `python -m ddp_train` process."""
    return subprocess.run([sys.executable, "-m", "ddp_train", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(**env_extra))


def torchrun(nproc, args, timeout=180, nnodes=1, **env_extra) -> list[subprocess.CompletedProcess]:
    """torchrun on this host; with nnodes > 1, one torchrun per 'node' on a static rendezvous."""
    if nnodes == 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "-m", "ddp_train", *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(**env_extra),
                             start_new_session=True)
        return [_finish(p, cmd, timeout)]
    port = free_port()
    procs = []
    for node in range(nnodes):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node-rank", str(node),
               "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(port),
               "-m", "ddp_train", *args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env(**env_extra), start_new_session=True))
    return [_finish(p, cmd, timeout) for p in procs]


def manual(world, init_method, args, timeout=120, per_rank=None, **env_extra) -> list[subprocess.CompletedProcess]:
    """One process per rank with --init-method/--rank/--world-size (classic multi-machine launch)."""
    procs = []
    for r in range(world):
        cmd = [sys.executable, "-m", "ddp_train", "--init-method", init_method, "--rank", str(r),
               "--world-size", str(world), *args, *((per_rank or {}).get(r, []))]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env(**env_extra), start_new_session=True))
    return [_finish(p, p.args, timeout) for p in procs]


def _finish(p, cmd, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # the whole process group: torchrun's workers too, which would otherwise live on as orphans
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = drain(p)
        raise AssertionError(f"timed out: {cmd}\n{out[-2000:]}\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def summary(proc) -> dict:
    """Rank 0's summary: the LAST stdout line, one JSON object (the ranks' progress records aside: another rank's
    may come after it)."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip() and '"event":"progress"' not in ln]
    assert lines, f"no stdout; rc={proc.returncode}\nstderr:\n{proc.stderr[-3000:]}"
    try:
        s = json.loads(lines[-1])
    except ValueError:
        raise AssertionError(f"last stdout line is not JSON: {lines[-1]!r}\nstderr:\n{proc.stderr[-3000:]}") from None
    assert s["event"] == "summary", s
    return s


def ok(proc):
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def leave_spawned_worker() -> None:
    """The end of a ``torch.multiprocessing.spawn`` worker that used a gloo group (a DDP model among its objects):
    the group ended, the output flushed, then ``os._exit(0)``. A normal exit finalises the interpreter with gloo's
    threads alive, which aborts the process now and then after its work was done (SIGABRT, "terminate called
    without an active exception"; ddp_train.launcher.worker says why); ``spawn`` would report that as a failure."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
