"""A job's TensorBoard event files: where they are (``ddpctl status``) and a copy kept with the job's output when
``down`` (or ``up --rm``) removes the volume or container that holds them.

``ddp-train --tensorboard DIR`` writes them on global rank 0, so node 0's container says where they are: its
command line names DIR (``up --tensorboard`` gives ``/checkpoints/tensorboard``), and its mounts say whether DIR
is on the host (a bind mount: the files stay there), in a named volume (the job's ``<job>-ckpt``, which ``down``
removes) or in the container's own file system. A program other than ddp-train is not followed.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

FLAG = "--tensorboard"
KEEP_DIR = "tensorboard"  # in the job's kept folder (ddpctl.joboutput.kept_output)
KEEP_MAX_BYTES = 64 * 1024**2  # a kept copy larger than this is not made (scalars take far less)


def flag_value(argv: tuple[str, ...] | list[str]) -> str | None:
    """DIR of ``ddp-train ... --tensorboard DIR`` in a node's argv, or None."""
    words = list(argv)
    start = next((i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] == "ddp-train"), None)
    if start is None:
        return None
    value = None
    for i in range(start + 1, len(words)):
        if words[i] == FLAG and i + 1 < len(words):
            value = words[i + 1]
        elif words[i].startswith(FLAG + "="):
            value = words[i].split("=", 1)[1]
    return value


def locate(container) -> dict | None:
    """Where the event files of the job whose node 0 is ``container`` (a ContainerInfo) are; None without
    ``--tensorboard``."""
    d = flag_value(container.command)
    if not d:
        return None
    out = {"dir": d, "container": container.name, "host": container.host or None, "volume": None,
           "host_path": None, "kept": None}
    best = None
    for kind, source, target in container.mounts:
        if d.startswith("/") and (d == target or d.startswith(target.rstrip("/") + "/")):
            if best is None or len(target) > len(best[2]):
                best = (kind, source, target)
    if best is not None:
        rest = d[len(best[2]):].lstrip("/")
        if best[0] == "volume":
            out["volume"] = best[1]
        elif best[0] == "bind":
            out["host_path"] = posixpath.join(best[1], rest) if rest else best[1]
    return out


def describe(tb: dict, job: str) -> str:
    """The status line: where the files are and the command that shows them."""
    if tb.get("kept"):
        return f"tensorboard: event files kept in {tb['kept']}; look at them with: tensorboard --logdir {tb['kept']}"
    if tb.get("host_path"):
        where = f" on Docker host {tb['host']}" if tb.get("host") else ""
        return (f"tensorboard: event files in {tb['host_path']}{where}; look at them with: tensorboard --logdir "
                f"{shlex.quote(tb['host_path'])}")
    if tb.get("removed"):
        return f"tensorboard: no event files kept from {tb['dir']} of {tb['container']} (removed with the job)"
    docker = ["docker"] + ((["-H", tb["host"]] if "://" in tb["host"] else ["--context", tb["host"]])
                           if tb.get("host") else [])
    local = f"./{job}-tensorboard"
    volume = f"volume {tb['volume']}; " if tb.get("volume") else ""
    return (f"tensorboard: event files in {tb['dir']} of {tb['container']} ({volume}'ddpctl down' keeps a copy); "
            f"copy them out with: {shlex.join([*docker, 'cp', tb['container'] + ':' + tb['dir'], local])}, then: "
            f"tensorboard --logdir {local}")


def keep(engine, container, folder: Path) -> dict | None:
    """Before ``container`` (node 0) is removed: its event files copied to ``folder/tensorboard`` unless they are
    on the host (a bind mount); the location as :func:`locate` gives it, with ``kept`` set when copied."""
    tb = locate(container)
    if tb is None or tb["host_path"]:
        return tb
    dest, tmp = folder / KEEP_DIR, folder / (KEEP_DIR + ".part")
    try:
        with tempfile.TemporaryFile() as buf:
            size = 0
            for chunk in engine.get_archive(container.id, tb["dir"]):
                size += len(chunk)
                if size > KEEP_MAX_BYTES:
                    raise ValueError(f"more than {KEEP_MAX_BYTES // 1024**2} MiB")
                buf.write(chunk)
            buf.seek(0)
            shutil.rmtree(tmp, ignore_errors=True)
            _extract(buf, tmp)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        tb["kept"] = str(dest)
    except Exception:  # noqa: BLE001 - none written yet, too large, or the container gone: nothing kept
        shutil.rmtree(tmp, ignore_errors=True)
        tb["removed"] = True
    return tb


def _extract(fileobj, dest: Path) -> None:
    """Plain files and directories of a ``docker cp`` archive (its top directory stripped) under ``dest``; any
    other member (a link, a device) or a path that would leave ``dest`` is skipped: the container is not trusted."""
    dest.mkdir(mode=0o700)  # the kept folder's modes: folders 0700, files 0600 (ddpctl.joboutput.kept_files)
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        for m in tar:
            parts = PurePosixPath(m.name).parts[1:]
            if not parts or m.name.startswith("/") or any(p in ("..", "") for p in parts):
                continue
            target = dest.joinpath(*parts)
            if m.isdir():
                _folders(dest, parts)
            elif m.isreg():
                _folders(dest, parts[:-1])
                src = tar.extractfile(m)
                with open(target, "wb", opener=_new_file) as f:
                    shutil.copyfileobj(src, f)


def _new_file(path: str, _flags: int) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _folders(dest: Path, parts) -> None:
    """dest/parts[0]/parts[1]/... made 0700, none of them a link."""
    d = dest
    for p in parts:
        d = d / p
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                raise NotADirectoryError(f"{d} is not a folder") from None
