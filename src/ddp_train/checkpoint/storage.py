"""Atomic, self-validating checkpoints.

Layout in ``--output-dir``: ``ckpt-<step:08d>.pt`` (a ``torch.save`` file) plus ``ckpt-<step:08d>.pt.json``
(its size and SHA-256, written after the ``.pt`` is in place). Both are written as a temp file that is
fsync'ed and renamed, then the directory is fsync'ed. A checkpoint counts only when its sidecar exists and
matches and it loads with the expected keys, so a save killed at any point leaves either the previous
checkpoint or the new one, never one that loads wrong.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import signal

import torch

from ddp_train.errors import EXIT_CHECKPOINT, EXIT_STORAGE, TrainError
from ddp_train.visible import bounded

FORMAT = "ddp-train-checkpoint/1"
_NAME = re.compile(r"^ckpt-(\d{8})\.pt$")
REQUIRED = ("format", "model", "optimizer", "scheduler", "epoch", "step", "step_in_epoch", "config")
# The types of a checkpoint's entries and of its config's (int: a non-negative one, positive where _POSITIVE says);
# an optional entry may be absent or None (older files lack some).
_TYPES = {"model": dict, "optimizer": dict, "scheduler": dict, "config": dict, "epoch": int, "step": int,
          "step_in_epoch": int, "rng": list, "samples_done": int, "schedule": dict, "segment": (list, tuple),
          "epoch_sample": int, "epoch_steps": int}
_CONFIG_TYPES = {"workload": str, "model": str, "optimizer": str, "world_size": int, "per_rank_batch": int,
                 "train_samples": int}
_POSITIVE = ("world_size", "per_rank_batch", "train_samples")
_NAMES = {dict: "a dict", list: "a list", str: "a string", (list, tuple): "a list"}
_SIDECAR_MAX = 64 * 1024  # a sidecar is ~150 bytes; a larger one is not ddp-train's
RESUME_FIX = "pass a checkpoint file (DIR/ckpt-<step>.pt with its .json sidecar), or --resume auto with --output-dir DIR"

# Test hook: DDP_TRAIN_TEST_KILL_IN_SAVE=N sends SIGKILL to this process halfway through writing the
# N-th checkpoint (after the temp file is partly written), to prove a killed save is harmless.
_saves = 0


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path, data: bytes, kill_midway=False):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            if kill_midway:
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)  # a full disk must not keep the partial temp file (nor fill up with one per attempt)
        raise
    _fsync_dir(d)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def free_bytes(path):
    """Bytes free to this user where ``path`` (or its nearest existing parent) lives, or None."""
    path = os.path.abspath(path)
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(n):
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def write_failed(output_dir, exc: OSError, needed: int) -> TrainError:
    """One line for a checkpoint that could not be written: the directory, why, its free space, the fix."""
    prev = list_checkpoints(output_dir)
    kept = f"the previous checkpoint {os.path.basename(prev[-1])} is intact" if prev else "no earlier checkpoint"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # a plain file where the directory (or one above it) goes
        return TrainError(f"cannot write a checkpoint to {output_dir}: it or a directory above it is a file, not a "
                          f"directory; {kept}; point --output-dir at a directory", EXIT_STORAGE)
    why = exc.strerror or type(exc).__name__
    needs = f", this checkpoint needs {_size(needed)}" if needed else ""
    return TrainError(f"cannot write a checkpoint to {output_dir}: {why} ({_size(free_bytes(output_dir))} free"
                      f"{needs}); {kept}; free space there, mount a writable and larger "
                      "directory, or point --output-dir elsewhere (--keep-checkpoints fewer)", EXIT_STORAGE)


def _write_pair(output_dir, path, data: bytes, meta: dict, kill: bool) -> None:
    """The checkpoint, then its sidecar; on a write error (full disk, read-only mount) neither is left and a
    one-line :class:`TrainError` (exit 7, permanent) names the directory and its free space."""
    try:
        _atomic_write(path, data, kill_midway=kill)
        try:
            _atomic_write(path + ".json", (json.dumps(meta) + "\n").encode())
        except BaseException:
            _remove(path)  # without its sidecar it would never load: give the space back
            raise
    except OSError as exc:
        raise write_failed(output_dir, exc, len(data)) from None


def save(output_dir, payload: dict, keep: int = 3) -> str:
    """Write ``payload`` as the checkpoint for ``payload['step']``; keep the newest ``keep`` ones."""
    global _saves
    _saves += 1
    kill = os.environ.get("DDP_TRAIN_TEST_KILL_IN_SAVE") == str(_saves)
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as exc:
        raise write_failed(output_dir, exc, 0) from None
    buf = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buf)
    data = buf.getvalue()
    path = os.path.join(output_dir, f"ckpt-{int(payload['step']):08d}.pt")
    meta = {"format": FORMAT, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "step": int(payload["step"]), "epoch": int(payload["epoch"])}
    _write_pair(output_dir, path, data, meta, kill)
    for old in list_checkpoints(output_dir)[:-keep] if keep else []:
        for p in (old, old + ".json"):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
    return path


def list_checkpoints(output_dir):
    """Checkpoint files by step, oldest first (validity not checked)."""
    if not output_dir or not os.path.isdir(output_dir):
        return []
    names = sorted(n for n in os.listdir(output_dir) if _NAME.match(n))
    return [os.path.join(output_dir, n) for n in names]


def validate(path) -> str | None:
    """None when ``path`` is a complete checkpoint, else why not (its foreign parts escaped and bounded)."""
    if os.path.isdir(path):
        return "it is a directory"
    if not os.path.isfile(path):
        return "no such file" if not os.path.lexists(path) else "it is not a regular file"
    try:
        with open(path + ".json", "rb") as f:
            raw = f.read(_SIDECAR_MAX + 1)
    except FileNotFoundError:
        return "its .json sidecar is missing (the save did not finish)"
    except OSError as exc:
        return f"its .json sidecar is unreadable ({bounded(exc.strerror or type(exc).__name__)})"
    try:
        meta = json.loads(raw) if len(raw) <= _SIDECAR_MAX else None
    except (ValueError, RecursionError):
        meta = None
    if not (isinstance(meta, dict) and _is_int(meta.get("bytes")) and 0 <= meta["bytes"] < 2**63
            and isinstance(meta.get("sha256"), str)):
        return "its .json sidecar is not one ddp-train writes (a JSON object with bytes and sha256)"
    try:
        size = os.path.getsize(path)
        if size != meta["bytes"]:
            return f"it has {size} bytes, the sidecar says {meta['bytes']} (truncated)"
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        return f"cannot read it ({bounded(exc.strerror or type(exc).__name__)})"
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        return "its SHA-256 does not match the sidecar (corrupt)"
    return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def shape_problem(ckpt) -> str | None:
    """None when a loaded checkpoint has the entries and types ddp-train writes, else what is wrong."""
    if not isinstance(ckpt, dict):
        return f"it holds a {type(ckpt).__name__}, not a dict"
    missing = [k for k in REQUIRED if k not in ckpt]
    if missing or ckpt.get("format") != FORMAT:
        return f"missing {missing or 'format'}"
    for where, entries, types in (("", ckpt, _TYPES), ("config.", ckpt["config"], _CONFIG_TYPES)):
        for key, want in types.items():
            v = entries.get(key)
            if v is None and not (where == "" and key in REQUIRED):
                continue
            least = 1 if key in _POSITIVE else 0
            if not (_is_int(v) and v >= least if want is int else isinstance(v, want)):
                name = ("a positive integer" if least else "a non-negative integer") if want is int else _NAMES[want]
                return f"its {where}{key} is not {name}"
    if not all(isinstance(k, str) and torch.is_tensor(v) for k, v in ckpt["model"].items()):
        return "its model is not a state_dict of named tensors"
    seg, plan = ckpt.get("segment"), ckpt.get("schedule")
    if seg is not None and (len(seg) != 2 or not all(_is_int(x) and x >= 0 for x in seg)):
        return "its segment is not (start sample, start step)"
    if plan is not None and not all(_is_int(plan.get(k)) and plan[k] >= 0 for k in ("total", "warm")):
        return "its schedule is not {total, warm} in samples"
    return None


def load(path, map_location="cpu", fix=RESUME_FIX) -> dict:
    """The checkpoint at ``path``, validated; else a one-line :class:`TrainError` (exit 5) ending in ``fix``."""
    shown = bounded(path, 300)
    why = validate(path)
    if why:
        raise TrainError(f"checkpoint {shown} is not usable: {why}; {fix}", EXIT_CHECKPOINT)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise TrainError(f"checkpoint {shown} does not load ({type(exc).__name__}: {bounded(exc, 120)}); {fix}",
                         EXIT_CHECKPOINT) from None
    why = shape_problem(ckpt)
    if why:
        raise TrainError(f"{shown} is not a ddp-train checkpoint ({why}); {fix}", EXIT_CHECKPOINT)
    return ckpt


def newest_valid(output_dir):
    """(path, skipped) where path is the newest valid checkpoint or None, skipped the invalid newer ones."""
    skipped = []
    for path in reversed(list_checkpoints(output_dir)):
        why = validate(path)
        if why is None:
            return path, skipped
        skipped.append((path, why))
    return None, skipped
