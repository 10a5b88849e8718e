"""ddp_train.__main__: the entry point: bad arguments and unwritable output (exit 2, one line), --help, and the
summary as the last stdout line."""

from __future__ import annotations

import json

import pytest

from ddp_train.__main__ import main
from ddp_train.errors import EXIT_USAGE

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


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
    assert err.count("\n") == 1 and "Traceback" not in err and "cannot write the metrics file" in err


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
