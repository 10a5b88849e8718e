"""`ddpctl bench` command line: help with examples, bad input -> one line and exit 2, nothing created."""

import json

import pytest

from ddpctl.cli.main import main


def run(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_help_has_examples(capsys):
    code, out, _ = run(capsys, "bench", "--help")
    assert code == 0
    assert "ddpctl bench --gpus 1,2" in out and "ddpctl bench compare" in out
    from ddpctl.spec import DEFAULT_CPU_IMAGE
    assert f"--runtime docker --image {DEFAULT_CPU_IMAGE}" in out  # the image 'make image-cpu' builds
    for flag in ("--workloads", "--strategies", "--gpus", "--pipelines", "--warmup", "--steps", "--repeat",
                 "--runtime", "--output"):
        assert flag in out
    code, out, _ = run(capsys, "bench", "compare", "--help")
    assert code == 0 and "Example: ddpctl bench compare" in out


@pytest.mark.parametrize("argv, needle", [
    (["--gpus", "one"], "--gpus must be comma-separated integers"),
    (["--gpus", "0,1"], "GPU counts must be at least 1"),
    (["--workloads", "bert"], "unknown workload 'bert'"),
    (["--strategies", "fsdp"], "unknown strategy 'fsdp'"),
    (["--pipelines", "dali"], "unknown pipeline 'dali'"),
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--runtime", "k8s"], "unknown runtime 'k8s'"),
    (["--probe-max", "lots"], "--probe-max"),
    (["--workloads", ""], "workloads is empty"),
    (["--steps", "x"], "Invalid value for '--steps'"),
    (["--python", "/nonexistent/python3"], "--python /nonexistent/python3 is not an executable"),
    (["--time-budget", "0"], "--time-budget must be positive"),
])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, argv, needle):
    out_dir = tmp_path / "never"
    code, out, err = run(capsys, "bench", *argv, "-o", str(out_dir))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err
    assert "Traceback" not in err and out == ""
    assert not out_dir.exists()


def test_output_is_a_file(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run(capsys, "bench", "-o", str(f))
    assert code == 2 and "is not a directory" in err


@pytest.mark.parametrize("content, needle", [
    (None, "report not found"),
    ("not json", "cannot read"),
    (json.dumps({"hello": 1}), "is not a ddpctl bench report"),
    (json.dumps({"schema_version": 99, "cells": []}), "schema version 99"),
])
def test_compare_bad_files(capsys, tmp_path, content, needle):
    a = tmp_path / "a.json"
    if content is not None:
        a.write_text(content)
    code, out, err = run(capsys, "bench", "compare", str(a), str(a))
    assert code == 2 and needle in err and err.count("\n") == 1 and out == ""
