"""`ddpctl render -o`: only regular files are replaced, atomically; bad targets are one-line usage errors.

Real files, links, FIFOs and the real /dev/null; the console script runs in subprocesses.
"""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.errors import UsageError
from ddpctl.outfiles import check_target, write_files

DDPCTL = str(Path(sys.executable).parent / "ddpctl")


def ddpctl(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def one_line_usage_error(result, needle):
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert needle in lines[0], lines[0]


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_dev_null_is_refused_and_stays_a_character_device():
    before = os.lstat("/dev/null")
    result = ddpctl("render", "compose", "-o", "/dev/null")
    one_line_usage_error(result, "character device")
    assert "> /dev/null" in result.stderr  # the fix: redirect stdout instead
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_character_device_in_tmp_is_not_replaced(tmp_path):
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    one_line_usage_error(ddpctl("render", "pytorchjob", "-o", str(dev)), "character device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    assert listing(tmp_path) == ["null"]


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line_usage_error(ddpctl("render", "compose", "-o", str(fifo)), "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert listing(tmp_path) == ["pipe"]


def test_symlink_is_refused_and_its_target_untouched(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text("keep me\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    one_line_usage_error(ddpctl("render", "compose", "-o", str(link)), "symbolic link")
    assert link.is_symlink() and real.read_text() == "keep me\n"
    dangling = tmp_path / "dangling.yaml"
    dangling.symlink_to(tmp_path / "nowhere.yaml")
    one_line_usage_error(ddpctl("render", "compose", "-o", str(dangling)), "symbolic link")
    assert not (tmp_path / "nowhere.yaml").exists()
    assert listing(tmp_path) == ["dangling.yaml", "link.yaml", "real.yaml"]


def test_socket_is_refused(tmp_path):
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        one_line_usage_error(ddpctl("render", "slurm", "-o", str(path)), "socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_directory_target_is_refused_with_the_trailing_slash_hint(tmp_path):
    # `-o d/` writes the default name d/compose.yaml, which here is a directory.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "compose.yaml").mkdir()
    one_line_usage_error(ddpctl("render", "compose", "-o", f"{tmp_path}/d/"), "is a directory, not a regular")


@pytest.mark.parametrize("case", ["missing-parent", "missing-grandparent-of-dir", "file-as-dir",
                                  "file-as-parent", "too-long-name", "empty"])
def test_bad_output_paths_one_line_exit_2_nothing_written(tmp_path, case):
    (tmp_path / "afile").write_text("x")
    out, needle = {
        "missing-parent": (tmp_path / "no" / "out.yaml", "does not exist"),
        "missing-grandparent-of-dir": (f"{tmp_path}/no/out/", "does not exist"),
        "file-as-dir": (f"{tmp_path}/afile/", "ends in '/' (a directory) but"),
        "file-as-parent": (tmp_path / "afile" / "x.yaml", "is a regular file, not a directory"),
        "too-long-name": (tmp_path / ("n" * 300 + ".yaml"), "longer than the file system allows"),
        "empty": ("", "-o is empty"),
    }[case]
    one_line_usage_error(ddpctl("render", "compose", "-o", str(out)), needle)
    assert listing(tmp_path) == ["afile"] and (tmp_path / "afile").read_text() == "x"


def test_long_name_within_the_limit_works(tmp_path):
    # The temporary file's name is bounded, so a 250-byte target name (under NAME_MAX) still works.
    out = tmp_path / ("n" * 245 + ".yaml")
    result = ddpctl("render", "compose", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert listing(tmp_path) == [out.name]


def test_dir_slash_is_created_when_its_parent_exists(tmp_path):
    result = ddpctl("render", "compose", "-f", str(Path(__file__).resolve().parents[2] / "examples" /
                                                     "multi-host.yaml"), "-o", f"{tmp_path}/out/")
    assert result.returncode == 0, result.stderr
    assert listing(tmp_path / "out") == ["compose.node-0.yaml", "compose.node-1.yaml"]


def test_dash_writes_stdout(tmp_path):
    result = ddpctl("render", "pytorchjob", "-o", "-", cwd=tmp_path)
    assert result.returncode == 0 and "kind: PyTorchJob" in result.stdout
    assert listing(tmp_path) == []


def test_replacing_a_regular_file_is_atomic_and_keeps_its_mode(tmp_path):
    out = tmp_path / "job.yaml"
    out.write_text("old\n")
    out.chmod(0o600)
    inode = os.lstat(out).st_ino
    result = ddpctl("render", "trainjob", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "kind: TrainJob" in out.read_text()
    assert stat.S_IMODE(os.lstat(out).st_mode) == 0o600
    assert os.lstat(out).st_ino != inode  # a new file renamed into place, not rewritten in place
    assert listing(tmp_path) == ["job.yaml"]


# --------------------------------------------------------------------------------- the library itself


def test_write_files_all_or_nothing(tmp_path):
    good = tmp_path / "a.yaml"
    fifo = tmp_path / "b.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO"):
        write_files({good: "a", fifo: "b"})
    assert listing(tmp_path) == ["b.yaml"]  # a.yaml was not written either


def test_write_files_failure_mid_write_leaves_no_temp_and_no_new_dir(tmp_path, monkeypatch):
    calls = {"n": 0}
    real_replace = os.replace

    def failing_replace(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    new_dir = tmp_path / "out"
    with pytest.raises(UsageError, match="No space left"):
        write_files({new_dir / "a": "a", new_dir / "b": "b"}, create_dirs=(new_dir,))
    # The first rename had happened; the directory stays with that file but no temp files.
    assert [p.name for p in new_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_write_files_removes_the_new_directory_when_nothing_was_written(tmp_path):
    new_dir = tmp_path / "out"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError):
        write_files({new_dir / "a": "a", tmp_path / "fifo": "x"}, create_dirs=(new_dir,))
    assert listing(tmp_path) == ["fifo"]


def test_check_target_accepts_missing_and_regular(tmp_path):
    assert check_target(tmp_path / "new.yaml") is None
    (tmp_path / "f").write_text("x")
    assert check_target(tmp_path / "f") is not None
    with pytest.raises(UsageError, match="NUL"):
        check_target(Path(str(tmp_path / "a\x00b")))
