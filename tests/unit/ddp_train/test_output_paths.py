"""ddp_train.config.output_paths: the output paths checked while the flags are parsed (a usable or creatable
directory or file, a file where a directory goes refused), creating nothing."""

from __future__ import annotations

import os

import pytest

from ddp_train.config.output_paths import problem
from ddp_train.config.settings import parse_args
from ddp_train.errors import EXIT_USAGE, TrainError


def test_what_each_path_can_be(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    os.symlink(tmp_path / "nothing", tmp_path / "dangling")
    assert problem(str(tmp_path), directory=True) is None
    assert problem(str(tmp_path / "new" / "deeper"), directory=True) is None  # creatable
    assert problem(str(afile), directory=False) is None
    assert problem(str(tmp_path / "new" / "m.jsonl"), directory=False) is None
    assert problem(str(afile), directory=True) == "is a file, not a directory"
    assert problem(str(tmp_path), directory=False) == "is a directory, not a file"
    assert problem(str(afile / "sub" / "x"), directory=True) == f"cannot be created: {afile} is a file, not a directory"
    assert problem(str(tmp_path / "dangling"), directory=True) == "is a symbolic link to nothing"
    assert sorted(os.listdir(tmp_path)) == ["afile", "dangling"]  # nothing created


def test_parse_args_refuses_the_first_unusable_output_path_in_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for flag in ("--output-dir", "--tensorboard", "--profile-dir"):
        with pytest.raises(TrainError) as got:
            parse_args([flag, str(afile)])
        assert got.value.code == EXIT_USAGE
        assert str(got.value) == f"{flag} {afile} is a file, not a directory; pass a directory this process can " \
                                 "write (or create)"
    assert parse_args(["--output-dir", str(tmp_path / "od"), "--metrics-file", str(afile)]).metrics_file == str(afile)
    assert sorted(os.listdir(tmp_path)) == ["afile"]
