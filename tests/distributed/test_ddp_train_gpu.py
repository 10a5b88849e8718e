"""ddp-train on GPUs with NCCL (runs only where CUDA is available: the lent GPU machine, see
docs/BENCHMARKS.md for the command and the recorded result)."""

from __future__ import annotations

import json

import pytest
import torch
from ddp_helpers import free_port, manual, ok, run, summary, torchrun

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA GPUs (run on the GPU machine)"),
]
NGPU = torch.cuda.device_count() if torch.cuda.is_available() else 0
need2 = pytest.mark.skipif(NGPU < 2, reason="needs 2 GPUs")
CIFAR = ["--workload", "cifar10", "--train-size", "8192", "--test-size", "2048", "--batch-size", "128",
         "--epochs", "3", "--model", "resnet18"]


def test_one_gpu_nccl_fast_path_converges():
    s = summary(ok(torchrun(1, CIFAR)[0]))
    assert s["backend"] == "nccl" and s["device"] == "cuda:0" and s["precision"] == "bf16"
    assert s["channels_last"] is True and s["data_pipeline"] == "device"
    assert s["final_accuracy"] > 0.5 and s["gpu_mem_gb"] > 0


@need2
def test_two_gpus_nccl_sync_check_passes_and_converges():
    s = summary(ok(torchrun(2, CIFAR)[0]))
    assert s["world_size"] == 2 and s["backend"] == "nccl" and s["sync_check"] == "pass"
    assert s["bn_stats_drift"] > 0 and s["final_accuracy"] > 0.5


@need2
def test_two_gpus_sync_bn_and_dataloader_pipeline():
    s = summary(ok(torchrun(2, CIFAR + ["--epochs", "1", "--sync-bn", "--data-pipeline", "dataloader",
                                        "--workers", "2"])[0]))
    assert s["sync_check"] == "pass" and s["bn_stats_drift"] == 0 and s["data_pipeline"] == "dataloader"


@need2
def test_two_gpus_manual_tcp_planted_divergence_is_caught():
    r0, r1 = manual(2, f"tcp://127.0.0.1:{free_port()}", CIFAR + ["--epochs", "1", "--debug-perturb-rank", "1"])
    s = summary(r0)
    assert r0.returncode == 4 and s["sync_check"] == "fail" and s["sync_mismatched"] == ["conv1.weight"]
    assert s["backend"] == "nccl"


@need2
def test_two_gpus_stop_resume_bit_identical(tmp_path):
    args = ["--workload", "toy", "--train-size", "2048", "--batch-size", "64", "--epochs", "2", "--deterministic",
            "--no-eval", "--sync-check", "off"]
    ok(torchrun(2, args + ["--output-dir", str(tmp_path / "a")])[0])
    ok(torchrun(2, args + ["--output-dir", str(tmp_path / "b"), "--max-steps", "11"])[0])
    ok(torchrun(2, args + ["--output-dir", str(tmp_path / "b"), "--resume", "auto"])[0])
    c = run(["compare", str(tmp_path / "a" / "ckpt-00000032.pt"), str(tmp_path / "b" / "ckpt-00000032.pt"), "--all"])
    assert c.returncode == 0, c.stdout + c.stderr
    assert json.loads(c.stdout.splitlines()[-1])["max_abs_diff"] == 0.0
