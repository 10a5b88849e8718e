"""`ddpctl bench` command line: help with examples, bad input -> one line and exit 2, nothing created."""

import json
import os

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
    (["--repeat", "0"], "--repeat must be between 1 and 100, got 0"),
    (["--repeat", "101"], "--repeat must be between 1 and 100, got 101"),
    (["--steps", "0"], "--steps must be between 1 and 1,000,000, got 0"),
    (["--gpus", "1,2000"], "--gpus: at most 16 counts of at most 1024 GPUs"),
    (["--probe-max", "2t"], "--probe-max must be between 1 byte and 1024 GiB"),
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


COMMITTED = "docs/benchmarks/2026-11-28-h100x4-forecast"


def test_forecast_of_a_committed_report(capsys, monkeypatch):
    """The worked example of docs/bench.md: ResNet-50, 8 and 64 nodes x 8 GPUs over 25 and 400 GbE."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, out, err = run(capsys, "bench", "forecast", COMMITTED, "--nodes", "8,64", "--gpus-per-node", "8",
                         "--links", "25gbe,400gbe", "--workloads", "imagenet-synthetic-resnet50")
    assert code in (0, None) and err == ""
    assert out.startswith(f"# Scaling forecast from {COMMITTED}/report.json (4 x NVIDIA H100 80GB HBM3")
    assert "### imagenet-synthetic-resnet50: forecast scaling efficiency (img/s)" in out
    assert "| link | 8 x 8 | 64 x 8 |" in out and "| `25gbe` |" in out and "| `400gbe` |" in out
    assert "cifar10-resnet18: forecast" not in out
    code, out, _ = run(capsys, "bench", "forecast", COMMITTED, "--json", "--nodes", "2", "--gpus-per-node", "4",
                       "--links", "measured")
    rows = json.loads(out)["rows"]
    assert {(r["nodes"], r["gpus_per_node"], r["link"]) for r in rows} == {(2, 4, "measured")}


@pytest.mark.parametrize("argv, needle", [
    (["--links", "3gbe"], "unknown link '3gbe'"),
    (["--nodes", "0"], "--nodes must be comma-separated positive integers"),
    (["--gpus-per-node", "eight"], "--gpus-per-node must be comma-separated positive integers"),
    (["--workloads", "bert"], "workload 'bert' is not in"),
])
def test_forecast_bad_input_is_one_line_exit_2(capsys, monkeypatch, argv, needle):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    code, out, err = run(capsys, "bench", "forecast", COMMITTED, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and needle in err and out == ""


def test_resume_bad_input_is_one_line_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "bench", "--resume", str(tmp_path / "nothing"))
    assert code == 2 and err.count("\n") == 1 and "no such directory" in err
    code, _, err = run(capsys, "bench", "--resume", str(tmp_path), "-o", str(tmp_path / "other"))
    assert code == 2 and err.count("\n") == 1 and "name two directories" in err
    code, _, err = run(capsys, "bench", "--resume", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "no bench-state.json there" in err
    assert list(tmp_path.iterdir()) == []


def test_rebuild_a_committed_report_and_bad_input(capsys, tmp_path):
    """`bench rebuild DIR`: a committed report (copied) made again from its bench-state.json: the same cells and
    measurements, one line on stderr; a directory without a state, a state that is not JSON or not one ddpctl
    writes: one line, exit 2, nothing written."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / COMMITTED
    dest = tmp_path / "a report"
    shutil.copytree(src, dest)
    before = json.loads((dest / "report.json").read_text())
    code, out, err = run(capsys, "bench", "rebuild", str(dest), "--no-plots")
    assert code in (0, None) and out == "" and err.count("\n") == 1
    assert err.startswith("bench rebuild: 17 cells; the forecast's largest miss ") and str(dest) in err
    after = json.loads((dest / "report.json").read_text())
    assert before["plots"] and after["plots"] == [] and not list(dest.glob("*.png"))  # --no-plots: none left
    assert [c["key"] for c in after["cells"]] == [c["key"] for c in before["cells"]]
    assert [c["images_per_sec"] for c in after["cells"]] == [c["images_per_sec"] for c in before["cells"]]
    assert after["hardware"] == before["hardware"] and after["created"] == before["created"]
    state = json.loads((src / "bench-state.json").read_text())
    unplannable = {**state, "matrix": {**state["matrix"], "workloads": ["bert"]}}
    huge = {**state, "matrix": {**state["matrix"], "repeat": 10**6}}
    empty = tmp_path / "empty"
    empty.mkdir()
    for content, needle in ((None, "no bench-state.json there"), ("{not json", "cannot read bench-state.json"),
                            ('{"format": 1, "runs": [], "x": NaN}', "(matrix is required)"),
                            ('{"format": 99, "runs": []}', "is not a state this ddpctl writes"),
                            (json.dumps({**state, "matrix": {"colour": "red"}}), "(matrix/workloads is required)"),
                            (json.dumps({**state, "runs": [5]}), "(runs/0 must be object, got integer 5)"),
                            (json.dumps(huge), "(matrix/repeat must be at most 100, got 1000000)"),
                            (json.dumps(unplannable), "does not describe a matrix this ddpctl can plan (unknown "
                                                      "workload 'bert')")):
        if content is not None:
            (empty / "bench-state.json").write_text(content)
        code, out, err = run(capsys, "bench", "rebuild", str(empty))
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and needle in err, err
        assert sorted(p.name for p in empty.iterdir()) == ([] if content is None else ["bench-state.json"])
    (empty / "bench-state.json").unlink()
    os.mkfifo(empty / "bench-state.json")  # read, it would never end
    import signal

    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("bench rebuild opened the FIFO and waited on it"))
    signal.alarm(20)
    try:
        code, out, err = run(capsys, "bench", "rebuild", str(empty))
    finally:
        signal.alarm(0)
    assert code == 2 and "bench-state.json is not a regular file" in err and err.count("\n") == 1
