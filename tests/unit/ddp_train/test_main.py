"""ddp_train.__main__: the entry point: bad arguments and unusable output paths (exit 2, one line, before anything
is created), a missing or directory checkpoint (exit 5, named as such), compare's errors and its foreign names
escaped, --help, and the summary as the last stdout line."""

from __future__ import annotations

import json
import os

import pytest
import torch

from ddp_train.__main__ import main
from ddp_train.checkpoint import storage as checkpoint
from ddp_train.errors import EXIT_CHECKPOINT, EXIT_SYNC, EXIT_USAGE

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


PAYLOAD = {"model": {"w": torch.zeros(2)}, "optimizer": {"state": {}, "param_groups": []}, "scheduler": {},
           "epoch": 0, "step": 1, "step_in_epoch": 1, "config": {}}


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("argv,needle", [
    (["--epochs", "0"], "must be > 0"),
    (["--workload", "nope"], "invalid choice"),
    (["--rank", "1"], "go together"),
    (["--rank", "2", "--world-size", "2"], "below --world-size"),
    (["--init-method", "udp://x:1", "--rank", "0", "--world-size", "1"], "not tcp://"),
    (["--resume", "auto"], "--output-dir"),
    (["--workload", "toy", "--data-dir", "/tmp"], "no real data set"),
    (["--batch-size", "4096"], "fewer than one batch"),
    (["--strategy", "dp", "--rank", "0", "--world-size", "2", "--init-method", "tcp://127.0.0.1:1"], "one process"),
])
def test_bad_arguments_exit_2_one_line(argv, needle, capsys):
    assert main(TINY + argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--output-dir", "--metrics-file"])
def test_unwritable_output_exits_2_one_line(tmp_path, capsys, flag):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")  # a path below a regular file cannot be created, even as root
    target = blocker / "out" / ("metrics.jsonl" if flag == "--metrics-file" else "")
    assert main(TINY + [flag, str(target)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{flag} {target} cannot be created: {blocker} is a file, not a directory" in err


@pytest.mark.parametrize("flag", ["--output-dir", "--tensorboard", "--profile-dir"])
def test_an_output_directory_that_is_a_file_is_refused_before_anything_is_created(tmp_path, capsys, flag):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    out = tmp_path / "od"
    extra = [] if flag == "--output-dir" else ["--output-dir", str(out), "--metrics-file", str(tmp_path / "m.jsonl")]
    assert main(TINY + extra + [flag, str(blocker), "--profile-steps", "2"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"ddp-train: error: {flag} {blocker} is a file, not a directory; pass a directory this process " \
                  "can write (or create)\n"
    assert sorted(os.listdir(tmp_path)) == ["afile"]  # no metrics file, no output directory, nothing trained


def test_a_metrics_file_that_is_a_directory_is_refused(tmp_path, capsys):
    assert main(TINY + ["--metrics-file", str(tmp_path)]) == EXIT_USAGE
    assert "is a directory, not a file" in capsys.readouterr().err


@pytest.mark.parametrize("name,why", [("nonexist.pt", "no such file"), ("", "it is a directory")])
def test_resume_from_a_missing_file_or_a_directory_names_that(tmp_path, capsys, name, why):
    assert main(TINY + ["--resume", str(tmp_path / name)]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert f"is not usable: {why}; pass a checkpoint file" in err and "sidecar is missing" not in err
    assert err.count("\n") == 1


def test_compare_of_a_missing_file_says_so_with_its_own_fix(tmp_path, capsys):
    assert main(TINY + ["--output-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "nope.pt"), str(tmp_path / "ckpt-00000004.pt")]) == EXIT_CHECKPOINT
    err = capsys.readouterr().err
    assert "nope.pt is not usable: no such file; pass two checkpoint files written by ddp-train" in err
    assert "--resume" not in err and err.count("\n") == 1


def test_compare_shows_a_hostile_key_escaped_and_bounded(tmp_path, capsys):
    a = checkpoint.save(str(tmp_path / "a"), PAYLOAD)
    evil = "\x1b]0;pwned\x07\x1b[2J" + "A" * 3000
    b = checkpoint.save(str(tmp_path / "b"), {**PAYLOAD, "model": {evil: torch.zeros(1), "w": torch.ones(2)}})
    assert main(["compare", a, b]) == EXIT_SYNC
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err and "\x07" not in captured.err and len(captured.err) < 1000
    assert "differs: w" in captured.err
    assert last_json(captured.out)["only_in_b"] == ["\\x1b]0;pwned\\x07\\x1b[2J" + "A" * 186 + "... (2814 more characters)"]
    assert main(["compare", a, b, "--all"]) == EXIT_SYNC


def test_help_has_an_example(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "--init-method" in out and "--debug" not in out
    assert main(["compare", "--help"]) == 0
    assert "example:" in capsys.readouterr().out


def test_single_process_summary_is_last_stdout_line(tmp_path, capsys):
    assert main(TINY + ["--output-dir", str(tmp_path)]) == 0
    s = last_json(capsys.readouterr().out)
    for key in ("world_size", "strategy", "backend", "workload", "images_per_sec", "step_time_s", "epoch_time_s",
                "final_accuracy", "sync_check", "data_time_s", "gpu_util", "gpu_mem_gb", "per_rank_batch",
                "global_batch", "device_name"):
        assert key in s
    assert s["sync_check"] == "skipped" and s["checkpoint"].endswith("ckpt-00000004.pt")
