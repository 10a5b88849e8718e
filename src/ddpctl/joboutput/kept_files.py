"""Files in ddpctl's state folder (``$XDG_STATE_HOME/ddpctl/jobs``), written and read without following links.

Rules, the same for every kept job:

- Folders are created 0700 and files 0600 (the owner's umask can only narrow that); a folder or file that an
  older ddpctl left wider is narrowed when its job is kept again.
- No symbolic link is followed inside the state folder: every folder is opened relative to its parent's
  descriptor with ``O_NOFOLLOW | O_DIRECTORY``, every file with ``O_NOFOLLOW``. A link where a kept job's
  folder belongs makes the keep fail (:class:`KeepFailed`) and is skipped by readers; a link where a file
  belongs is replaced by the new file (a rename replaces the link, never its target), never read.
- Every file is written to a temporary name in its folder and renamed into place: a reader sees the old file or
  the new one, never half of one.
- JSON is strict: NaN and the infinities are written as null.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections import deque
from pathlib import Path

from ddpctl.errors import DdpctlError
from ddpctl.joboutput.records import json_safe

DIR_MODE, FILE_MODE = 0o700, 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


class KeepFailed(DdpctlError):
    """A job's output could not be kept: its containers stay (``down`` removes them only after the keep)."""

    exit_code = 1


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def open_folder(parent: int | None, name: str | Path, *, create: bool) -> int:
    """A descriptor of folder ``name`` (relative to descriptor ``parent``, or a path when None), never through a
    link; created 0700 when ``create``, narrowed to 0700 when it is wider. Raises OSError (ELOOP for a link)."""
    if create:
        try:
            os.mkdir(name, DIR_MODE, dir_fd=parent)
        except FileExistsError:
            pass
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        try:
            link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
        except OSError:
            link = False
        if link:
            raise OSError(errno.ELOOP, "a symbolic link, which ddpctl does not follow in its state folder",
                          str(name)) from None
        raise exc
    if create:
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if mode & 0o077:
                os.fchmod(fd, mode & DIR_MODE & ~_umask())
        except OSError:
            os.close(fd)
            raise
    return fd


def open_path(base: Path, parts: tuple[str, ...], *, create: bool) -> int:
    """The folder ``base/parts[0]/parts[1]/...``: ``base`` is the user's (it may be reached through a link),
    each of ``parts`` is ddpctl's and never a link."""
    if create:
        base.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            nxt = open_folder(fd, part, create=create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


class AtomicFile:
    """A file written to a temporary name in folder ``dir_fd`` and renamed to ``name`` by :meth:`commit`
    (0600 whatever the umask allows; a link at ``name`` is replaced, not followed). Unlinked on failure."""

    def __init__(self, dir_fd: int, name: str) -> None:
        self.dir_fd, self.name = dir_fd, name
        self.tmp = f".{name}.{os.getpid()}.tmp"
        try:
            os.unlink(self.tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                     dir_fd=dir_fd)
        self.file = os.fdopen(fd, "wb", buffering=1 << 20)

    def write(self, data: bytes) -> None:
        self.file.write(data)

    def commit(self) -> None:
        self.file.close()
        os.replace(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)

    def discard(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp, dir_fd=self.dir_fd)
        except OSError:
            pass

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


_TMP = re.compile(r"^\..+\.([0-9]{1,10})\.tmp$")  # AtomicFile's temporary names


def sweep_stale(dir_fd: int) -> int:
    """Remove the temporary files (``.<name>.<pid>.tmp``) that a keep killed before it could rename or unlink
    them (SIGKILL, a lost machine) left in folder ``dir_fd``: those whose process is gone. Returns how many."""
    removed = 0
    for entry in os.listdir(dir_fd):
        m = _TMP.match(entry)
        if m is None or _alive(int(m.group(1))):
            continue
        try:
            os.unlink(entry, dir_fd=dir_fd)
            removed += 1
        except OSError:  # another keep's sweep took it first, or not ours to remove
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process (or not a pid at all: leave the file)
    return True


def write_file(dir_fd: int, name: str, data: bytes) -> None:
    with AtomicFile(dir_fd, name) as f:
        f.write(data)


def dumps(value, **kw) -> str:
    """Strict JSON (``allow_nan=False`` after :func:`strict`)."""
    return json.dumps(json_safe(value), allow_nan=False, **kw)


def read_bytes(dir_fd: int | None, name: str | Path, limit: int) -> bytes | None:
    """The first ``limit`` bytes of regular file ``name`` (None when missing, a link, or not a regular file)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_folder(path: Path) -> bool:
    """A real folder (not a link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def tree_size(path: Path) -> int:
    """Bytes in the regular files under folder ``path``, links neither followed nor counted."""
    total = 0
    for top, dirs, files in os.walk(path, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        dirs[:] = [d for d in dirs if is_folder(Path(top) / d)]
    return total


def read_tail(dir_fd: int, name: str, limit: int) -> bytes | None:
    """The last ``limit`` bytes of regular file ``name``, from a line start (None when missing or a link)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            start = max(0, st.st_size - limit)
            f.seek(start)
            if start:
                f.readline()
            return f.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_node_logs(fd: int, limit: int, tail: int | None) -> tuple[dict[tuple[int, int], list[tuple[str, str]]],
                                                                dict[tuple[int, int], int]]:
    """Every ``attempt-<R>/node-<N>.log`` of the kept folder ``fd`` as (stamp, text) lines per (R, N), each read up
    to its last ``limit`` bytes, and with ``tail`` only its last ``tail`` lines (the older ones counted per (R, N)
    in the second dict); nothing is read through a link."""
    lines: dict[tuple[int, int], list[tuple[str, str]]] = {}
    cut: dict[tuple[int, int], int] = {}
    for a_name in sorted(os.listdir(fd)):
        a = a_name.partition("-")[2]
        if not (a_name.startswith("attempt-") and a.isdigit() and len(a) <= 9):
            continue
        try:
            a_fd = open_folder(fd, a_name, create=False)
        except OSError:
            continue  # a link, or not a folder: never followed
        try:
            for f_name in sorted(os.listdir(a_fd)):
                n = f_name.removeprefix("node-").removesuffix(".log")
                if f_name.startswith("node-") and f_name.endswith(".log") and n.isdigit() and len(n) <= 9:
                    data = read_tail(a_fd, f_name, limit)
                    if data is not None:
                        # lines end at "\n" only (a job's "\r" stays inside its line, as keep wrote it); with a
                        # tail, only the newest lines are ever held
                        count = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
                        raw = [line.decode("utf-8", "replace") for line in deque(_lines_of(data), maxlen=tail)]
                        del data
                        if tail is not None and count > tail:
                            cut[(int(a), int(n))] = count - tail
                        lines[(int(a), int(n))] = [(stamp, text) for stamp, _, text in
                                                   (line.partition(" ") for line in raw)]
                        del raw
        finally:
            os.close(a_fd)
    return lines, cut


def _lines_of(data: bytes):
    """The lines of ``data`` one at a time (ending at "\n"), never all of them in a list."""
    start, end = 0, len(data)
    while start < end:
        stop = data.find(b"\n", start)
        if stop < 0:
            stop = end
        yield data[start:stop]
        start = stop + 1
