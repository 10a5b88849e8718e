"""Writing the files ddpctl produces (``render -o``, ``make render``): safe targets, all or nothing.

Rules, the same for every file ddpctl writes:

- Only regular files are replaced. A target that exists and is anything else is refused with a one-line error:
  a directory, a symbolic link (also a dangling one), a character or block device (``-o /dev/null`` as root
  would otherwise replace the real ``/dev/null``), a FIFO or a socket. ddpctl never writes *through* a link or
  into a device: to send output there, leave out ``-o`` and redirect stdout (``> /dev/null``).
- Each file is written to a temporary file in its own directory (a name of bounded length, so a long target
  name does not overflow the file system's name limit), flushed and fsynced; only when every file is complete
  are they renamed into place. An error, or Ctrl-C, removes the temporary files, so no partial or half-updated
  file is ever left; a directory created for the output (``-o out/``) is removed again if nothing was written.
- A replaced file keeps its permission bits; a new one gets 0644 (0755 for scripts).
- Bad targets are usage errors (exit 2) named before anything is written: a missing parent directory, a parent
  that is a file (``-o afile/``), a name longer than the file system allows, a NUL byte.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from ddpctl.errors import UsageError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)
_TEMP_STEM = 32  # characters of the target's name kept in its temporary file's name


def file_kind(mode: int) -> str:
    """'a regular file', 'a directory', 'a symbolic link', 'a character device', ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, what in _KINDS:
        if test(mode):
            return what
    return "a special file"


def _shell_word(path: str | Path) -> str:
    """A path as one word of a suggested command: shlex-quoted (pasting it runs no ``$(...)`` and keeps a blank in
    the word), ``./`` before a leading '-' (never read as an option), control characters shown as text."""
    from ddpctl.joboutput.visible import visible

    text = str(path)
    return visible(shlex.quote("./" + text if text.startswith("-") else text))


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # a parent is not a directory: reported by the parent check
    except OSError as exc:
        raise UsageError(f"cannot check output {str(path)!r} ({exc.strerror})", "check the path") from None


def _name_max(directory: Path) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_directory(directory: Path, *, create: bool = False) -> bool:
    """The directory files go into must exist (or be creatable when ``create``: its parent exists).

    Returns True when it does not exist yet and will be created by :func:`write_files`.
    """
    if "\x00" in str(directory):
        raise UsageError("the output path contains a NUL byte", "give a plain path")
    st = _lstat(directory)
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(directory)  # a link to a directory is a fine place to put files
        except OSError:
            st = None
    if st is None:
        parent = directory.parent
        if create and parent.is_dir():
            return True
        missing = directory if not create else parent
        blocker = next((p for p in [missing, *missing.parents] if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise UsageError(f"output directory {str(missing)!r} is not a directory: {str(blocker)!r} is a file",
                             "choose another path")
        raise UsageError(f"output directory {str(missing)!r} does not exist",
                         f"create it first (mkdir -p {_shell_word(missing)}) or choose another path")
    if not stat.S_ISDIR(st.st_mode):
        if create:  # `-o afile/`
            raise UsageError(f"output {str(directory) + os.sep!r} ends in '{os.sep}' (a directory) but "
                             f"{str(directory)!r} is {file_kind(st.st_mode)}",
                             f"remove the trailing '{os.sep}' or choose another path")
        raise UsageError(f"output directory {str(directory)!r} is {file_kind(st.st_mode)}, not a directory",
                         "choose another path")
    return False


def check_target(path: Path) -> os.stat_result | None:
    """Refuse an output path ddpctl must not replace; returns the existing regular file's stat, or None."""
    text = str(path)
    if "\x00" in text:
        raise UsageError("the output path contains a NUL byte", "give a plain path")
    if not path.name or path.name in (".", ".."):
        raise UsageError(f"output {text!r} names no file", "give a file name, or a directory ending in '/'")
    name_bytes = len(os.fsencode(path.name))
    limit = _name_max(path.parent if path.parent.is_dir() else Path("."))
    if name_bytes > limit:
        raise UsageError(f"output file name {path.name[:40]!r}... is {name_bytes} bytes, longer than the "
                         f"file system allows ({limit})", "use a shorter name")
    if len(os.fsencode(os.path.abspath(text))) >= 4096:
        raise UsageError("the output path is longer than the system allows (4096 bytes)", "use a shorter path")
    st = _lstat(path)
    if st is None:
        return None
    if stat.S_ISREG(st.st_mode):
        return st
    what = file_kind(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        fix = f"give a file name, or -o {_shell_word(text.rstrip(os.sep) + os.sep)} to write the default file names into it"
    elif stat.S_ISLNK(st.st_mode):
        fix = (f"ddpctl does not write through links: give the real path, or leave out -o and redirect stdout "
               f"(> {_shell_word(text)})")
    else:
        fix = f"ddpctl replaces only regular files: leave out -o and redirect stdout instead (> {_shell_word(text)})"
    raise UsageError(f"output {text!r} is {what}, not a regular file", fix)


def write_files(files: Mapping[Path, str | bytes], *, mode: int = 0o644,
                create_dirs: tuple[Path, ...] = ()) -> None:
    """Write every file or none (see the module docstring). ``create_dirs`` are made first (their parents
    must exist) and removed again if the write fails."""
    for d in create_dirs:
        check_directory(d, create=True)
    for path in files:
        if path.parent not in create_dirs:
            check_directory(path.parent)
        check_target(path)
    made: list[Path] = []
    temps: list[tuple[str, Path]] = []
    done = False
    try:
        for d in create_dirs:
            if not d.is_dir():
                d.mkdir()
                made.append(d)
        for path, content in files.items():
            existing = check_target(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:_TEMP_STEM]}.", suffix=".tmp")
            temps.append((tmp, path))
            data = content.encode("utf-8") if isinstance(content, str) else content
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, stat.S_IMODE(existing.st_mode) if existing else mode)
        for tmp, path in temps:
            check_target(path)  # again, right before the rename: nothing special appeared meanwhile
            os.replace(tmp, path)
        temps.clear()
        done = True
        for directory in {p.parent for p in files}:
            _fsync_dir(directory)
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or 'the output'} ({_reason(exc)})",
                         "check the path and its permissions") from None
    finally:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if not done:
            for d in reversed(made):
                try:
                    d.rmdir()
                except OSError:
                    pass


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return exc.strerror or exc.__class__.__name__


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
