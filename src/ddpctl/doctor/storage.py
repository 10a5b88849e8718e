"""The checkpoint space check: will the job's checkpoint directory hold its checkpoints?

A save writes the new checkpoint beside the ``keep`` newest ones (ddp-train ``--keep-checkpoints``, default 3)
before it removes the oldest, so the directory must have room for ``keep + 1`` checkpoints. The size is known
from ``--checkpoint-size`` or from a checkpoint already there (its sidecar's ``bytes``: a resumed job). Where
the checkpoints live: ``--checkpoint-dir`` (a directory mounted at /checkpoints), else the job's checkpoint
volume ``<job>-ckpt``, which lives in the Docker Engine's data root (``DockerRootDir``, this machine's when the
engine is local).
"""

from __future__ import annotations

import json
import re

from ddpctl.doctor.model import Check, Options, Probes

_SIDECAR = re.compile(r"^ckpt-\d{8}\.pt\.json$")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""  # pragma: no cover


def known_size(opts: Options, p: Probes) -> tuple[int | None, str]:
    """(bytes of one checkpoint, where that figure comes from)."""
    if opts.checkpoint_size:
        return opts.checkpoint_size, "--checkpoint-size"
    if opts.checkpoint_dir:
        sizes = []
        for name in p.listdir(opts.checkpoint_dir) or []:
            if _SIDECAR.match(name):
                try:
                    sizes.append(int(json.loads(p.read(f"{opts.checkpoint_dir}/{name}") or "{}").get("bytes", 0)))
                except (ValueError, TypeError, AttributeError):
                    continue
        if sizes:
            return max(sizes), f"the checkpoints in {opts.checkpoint_dir}"
    return None, ""


def check_checkpoint_space(opts: Options, p: Probes, state: dict) -> Check:
    name = "checkpoint space"
    size, source = known_size(opts, p)
    if opts.checkpoint_dir:
        where = opts.checkpoint_dir
    else:
        root = ((state.get("docker") or {}).get("info") or {}).get("DockerRootDir")
        if not root:
            return Check(name, "warn", "the Docker Engine's data root (where the checkpoint volume lives) is unknown",
                         "fix the docker check, or give the directory mounted at /checkpoints with --checkpoint-dir")
        where = root
    free = p.free_bytes(where) if p.free_bytes else None
    if free is None:
        return Check(name, "warn", f"cannot tell the free space of {where}",
                     "check it with 'df -h', or give --checkpoint-dir a directory on this machine")
    if size is None:
        return Check(name, "ok", f"{_size(free)} free in {where} (checkpoint size unknown: give --checkpoint-size "
                     "to check it holds them)")
    need = size * (opts.keep_checkpoints + 1)
    detail = (f"{_size(free)} free in {where}; {opts.keep_checkpoints + 1} checkpoint(s) of {_size(size)} (from "
              f"{source}; the {opts.keep_checkpoints} kept plus the one being written) need {_size(need)}")
    if free < need:
        return Check(name, "fail", detail, "free space there, use a larger directory (-v DIR:/checkpoints), or keep "
                     "fewer checkpoints (ddp-train --keep-checkpoints)")
    return Check(name, "ok", detail)
