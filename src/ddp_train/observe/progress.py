"""Progress records: one JSON line per report on stdout, read back by ``ddpctl status``, ``ps`` and ``plot``.

Standard library only, and no import of the rest of ddp_train: a training script imports it from the image
(``from ddp_train.observe.progress import report``) or copies this one file next to itself. The record is described
by ``progress.schema.json`` (version :data:`VERSION`); readers ignore keys they do not know.

    from ddp_train.observe.progress import report
    for step in range(start, total):
        ...
        if step % 50 == 0:
            report(step=step + 1, total=total, loss=loss.item(), samples_per_sec=rate)

Where the record goes: a line of its own on stdout, ``{"event": "progress", "version": 1, ...}``. Every
launcher keeps stdout (docker logs, Slurm's output file, kubectl logs); ddpctl keeps the lines of a job's
earlier attempts when it restarts or removes it, so the records survive restarts. Report values your
program already has on the host (``loss.item()`` at a log interval, not every step): a report never
touches the device.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

VERSION = 1
EVENT = "progress"
_T0 = time.monotonic()
_LOCK = threading.Lock()
_KEYS = ("epoch", "epochs", "samples_per_sec", "step_time_s", "loss", "lr", "gpu_util", "gpu_mem_gb")


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def record(step: int, total: int | None = None, *, checkpoint_step: int | None = None,
           checkpoint_path: str | None = None, **fields) -> dict:
    """The progress record as a dict (see :func:`report`); rank, node and restart come from the launcher's env."""
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be a non-negative int, got {step!r}")
    if total is not None and (not isinstance(total, int) or total < 1):
        raise ValueError(f"total must be a positive int or None, got {total!r}")
    rec: dict = {"event": EVENT, "version": VERSION, "time": round(time.time(), 3), "step": step, "total": total,
                 "rank": _env_int("RANK") or 0, "world_size": _env_int("WORLD_SIZE") or 1,
                 "local_rank": _env_int("LOCAL_RANK") or 0, "node": _env_int("GROUP_RANK"),
                 "host": socket.gethostname(), "restart": _env_int("DDPCTL_RESTART_COUNT") or 0,
                 "wall_time_s": round(time.monotonic() - _T0, 3)}
    for key, value in fields.items():
        if value is not None and isinstance(value, float):
            value = round(value, 6) if value == value and abs(value) != float("inf") else None
        rec[key] = value
    for key in _KEYS:
        rec.setdefault(key, None)
    rec["checkpoint"] = None if checkpoint_step is None else {"step": checkpoint_step, "path": checkpoint_path}
    return rec


def report(step: int, total: int | None = None, *, loss: float | None = None, samples_per_sec: float | None = None,
           epoch: int | None = None, lr: float | None = None, checkpoint_step: int | None = None,
           checkpoint_path: str | None = None, stream=None, **fields) -> dict:
    """Write one progress record line (steps done so far, of ``total``) to ``stream`` (stdout) and flush it.

    ``epoch`` counts from 1. Extra keyword fields (``step_time_s``, ``gpu_util``, ``gpu_mem_gb``, ``epochs``,
    your own) go into the record as they are: plain JSON values only. Returns the record."""
    rec = record(step, total, loss=loss, samples_per_sec=samples_per_sec, epoch=epoch, lr=lr,
                 checkpoint_step=checkpoint_step, checkpoint_path=checkpoint_path, **fields)
    line = json.dumps(rec, separators=(",", ":")) + "\n"
    out = stream or sys.stdout
    with _LOCK:  # one write: a line never interleaves with another thread's
        out.write(line)
        out.flush()
    return rec

