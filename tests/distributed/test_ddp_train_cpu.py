"""ddp-train on real gloo process groups (CPU): torchrun, manual tcp:// and file:// launch, DP and single,
convergence, the sync check, stop/resume determinism, killed saves, and the fail-fast paths."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_helpers import TOY, manual, ok, run, summary, torchrun
from ports import free_port

pytestmark = pytest.mark.distributed
ROOT = Path(__file__).resolve().parents[2]


def test_default_run_two_nodes_two_procs_passes_sync_check():
    """`ddp-train` with no arguments, 2 nodes x 2 processes (the Docker integration tests rely on this)."""
    node0, node1 = torchrun(2, [], nnodes=2)
    ok(node0), ok(node1)
    s = summary(node0)
    assert s["world_size"] == 4 and s["strategy"] == "ddp" and s["backend"] == "gloo" and s["launch"] == "torchrun"
    assert s["workload"] == "toy" and s["sync_check"] == "pass" and s["sync_mismatched"] == []
    assert s["bn_stats_drift"] > 0  # reported separately, not a failure, without --sync-bn
    assert s["per_rank_batch"] * 4 == s["global_batch"]
    assert s["images_per_sec"] > 0 and s["epoch_time_s"] > 0
    # only rank 0 prints the summary
    assert '"event": "summary"' not in node1.stdout


@pytest.mark.parametrize("nproc", [1, 2, 3])
def test_torchrun_world_sizes_converge(nproc, tmp_path):
    p = ok(torchrun(nproc, TOY + ["--epochs", "3", "--output-dir", str(tmp_path)])[0])
    s = summary(p)
    assert s["world_size"] == nproc and s["strategy"] == "ddp"
    assert s["sync_check"] == ("pass" if nproc > 1 else "skipped")
    # 10 classes: chance is 0.10; the learnable synthetic data gets well above it in 3 short epochs
    assert s["final_accuracy"] > 0.5, s
    assert s["steps"] == 3 * (512 // nproc // 32 if 512 % nproc == 0 else -(-512 // nproc) // 32)
    events = [json.loads(line)["event"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "summary" and "step" in events and events.count("epoch") == 3
    assert (tmp_path / f"ckpt-{s['steps']:08d}.pt").exists()


@pytest.mark.parametrize("scheme", ["tcp", "file"])
def test_manual_init_two_processes(scheme, tmp_path):
    init = f"tcp://127.0.0.1:{free_port()}" if scheme == "tcp" else f"file://{tmp_path}/rendezvous"
    r0, r1 = manual(2, init, TOY)
    ok(r0), ok(r1)
    s = summary(r0)
    assert s["launch"] == scheme and s["world_size"] == 2 and s["sync_check"] == "pass"
    # ranks other than 0 print nothing but their own progress records (one JSON line per log interval)
    records = [json.loads(line) for line in r1.stdout.splitlines() if line.strip()]
    assert records and all(r["event"] == "progress" for r in records), r1.stdout[-2000:]
    assert {(r["rank"], r["world_size"]) for r in records} == {(1, 2)}
    rank0 = [json.loads(line) for line in r0.stdout.splitlines() if line.startswith('{"event":"progress"')]
    assert rank0 and {(r["rank"], r["world_size"]) for r in rank0} == {(0, 2)}


@pytest.mark.parametrize("strategy", ["dp", "single"])
def test_dataparallel_and_single(strategy):
    s = summary(ok(run(TOY + ["--strategy", strategy])))
    assert s["strategy"] == strategy and s["world_size"] == 1 and s["sync_check"] == "skipped"
    assert s["final_accuracy"] > 0.5


def test_dataloader_pipeline_with_workers_converges():
    s = summary(ok(run(TOY + ["--data-pipeline", "dataloader", "--workers", "1", "--epochs", "3"])))
    assert s["data_pipeline"] == "dataloader" and s["final_accuracy"] > 0.5


def test_classic_reference_pipeline_trains_on_two_ranks():
    """--data-pipeline classic (the reference pipeline: a torchvision-style dataset + PIL transforms in workers) under DDP."""
    s = summary(ok(torchrun(2, TOY + ["--data-pipeline", "classic", "--workers", "1", "--epochs", "3"])[0]))
    assert s["data_pipeline"] == "classic" and s["sync_check"] == "pass" and s["final_accuracy"] > 0.5


def test_classic_transforms_are_torchvisions_operations():
    """The built-in stand-ins for RandomCrop(padding)/RandomHorizontalFlip/ToTensor/Normalize (used where
    torchvision is absent) compute what torchvision's do: un-augmented, (x / 255 - mean) / std of the HWC image;
    augmented, a window of the zero-padded image, mirrored or not."""
    import torch

    from ddp_train.data.datasets import Split
    from ddp_train.data.pipeline_classic import TorchvisionStyleDataset, _Builtin

    g = torch.Generator().manual_seed(3)
    imgs = torch.randint(0, 256, (4, 3, 8, 6), dtype=torch.uint8, generator=g)
    split = Split(imgs, torch.arange(4), 4, "synthetic")
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    plain = TorchvisionStyleDataset(split, pad=2, flip=True, augment=False, mean=mean, std=std)
    assert plain.data.shape == (4, 8, 6, 3) and plain.targets == [0, 1, 2, 3]
    x, y = plain[(0, 5)]  # (epoch, index) keys from the shard sampler; the index wraps around the pool
    ref = (imgs[1].float() / 255 - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    assert y == 1 and x.shape == (3, 8, 6)
    torch.testing.assert_close(x, ref)
    aug = _Builtin(8, 6, 2, True, mean, std)
    from PIL import Image

    padded = torch.nn.functional.pad(ref * torch.tensor(std).view(3, 1, 1) + torch.tensor(mean).view(3, 1, 1),
                                     (2, 2, 2, 2))  # zero padding in [0, 1] units
    windows = [padded[:, i:i + 8, j:j + 6] for i in range(5) for j in range(5)]
    windows += [w.flip(2) for w in windows]
    torch.manual_seed(0)
    for _ in range(20):
        out = aug(Image.fromarray(plain.data[1]))
        raw = out * torch.tensor(std).view(3, 1, 1) + torch.tensor(mean).view(3, 1, 1)
        assert any(torch.allclose(raw, w, atol=1e-5) for w in windows)


def test_sync_check_catches_planted_divergence():
    init = f"tcp://127.0.0.1:{free_port()}"
    r0, r1 = manual(2, init, TOY + ["--epochs", "1", "--debug-perturb-rank", "1"])
    s = summary(r0)
    assert r0.returncode == 4 and r1.returncode == 4
    assert s["sync_check"] == "fail" and s["exit_code"] == 4
    assert s["sync_mismatched"] == ["features.0.0.weight"]
    assert "sync check failed" in r0.stderr and "features.0.0.weight" in r0.stderr


def test_sync_bn_keeps_bn_stats_identical():
    s = summary(ok(torchrun(2, TOY + ["--epochs", "1", "--sync-bn"])[0]))
    assert s["sync_check"] == "pass" and s["bn_stats_drift"] == 0 and s["sync_bn"] is True


def test_stop_and_resume_is_bit_identical(tmp_path):
    """mnist-cnn has dropout, so this also proves per-rank RNG state is saved and restored."""
    args = ["--workload", "mnist", "--train-size", "512", "--test-size", "64", "--batch-size", "32", "--epochs", "2",
            "--deterministic", "--no-eval", "--sync-check", "off"]
    full, part = tmp_path / "full", tmp_path / "part"
    ok(torchrun(2, args + ["--output-dir", str(full)])[0])
    # stop mid-epoch 1 (8 steps per epoch), then resume to the end
    s1 = summary(ok(torchrun(2, args + ["--output-dir", str(part), "--max-steps", "5"])[0]))
    assert s1["steps"] == 5
    s2 = summary(ok(torchrun(2, args + ["--output-dir", str(part), "--resume", "auto"])[0]))
    assert s2["resumed_from"].endswith("ckpt-00000005.pt") and s2["steps"] == 16
    a, b = full / "ckpt-00000016.pt", part / "ckpt-00000016.pt"
    cmp = run(["compare", str(a), str(b), "--all"])
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    res = json.loads(cmp.stdout.splitlines()[-1])
    assert res["identical_or_within_atol"] and res["max_abs_diff"] == 0.0 and res["tensors"] > 0
    # ... and compare does tell different models apart (negative control)
    assert run(["compare", str(a), str(part / "ckpt-00000005.pt")]).returncode == 4


def test_a_checkpoint_that_does_not_fit_stops_every_rank_with_the_same_line(tmp_path):
    """Rank 0 reads the checkpoint; what makes it unusable reaches every rank, which exits 5 (no lost peer)."""
    ok(run(TOY + ["--strategy", "single", "--epochs", "1", "--output-dir", str(tmp_path)]))
    for bad in (["--optimizer", "adamw"], ["--resume", str(tmp_path / "nope.pt")]):
        procs = manual(2, f"tcp://127.0.0.1:{free_port()}", TOY + ["--output-dir", str(tmp_path), "--resume", "auto", *bad])
        lines = [p.stderr.strip().splitlines()[-1] for p in procs]
        assert [p.returncode for p in procs] == [5, 5], lines
        assert lines[0] == lines[1] and ("saved with --optimizer sgd" in lines[0] or "no such file" in lines[0])


def test_killed_save_leaves_previous_checkpoint_loadable(tmp_path):
    args = TOY + ["--strategy", "single", "--epochs", "1", "--checkpoint-every", "4", "--output-dir", str(tmp_path)]
    p = run(args, DDP_TRAIN_TEST_KILL_IN_SAVE="2")  # SIGKILL halfway through writing the 2nd checkpoint
    assert p.returncode == -signal.SIGKILL
    names = sorted(os.listdir(tmp_path))
    assert "ckpt-00000004.pt" in names and "ckpt-00000008.pt" not in names
    assert any(n.startswith(".ckpt-00000008.pt.tmp-") for n in names)  # the half-written temp file
    s = summary(ok(run(args + ["--resume", "auto"])))
    assert s["resumed_from"].endswith("ckpt-00000004.pt") and s["steps"] == 16


def test_lost_peer_is_retryable():
    init = f"tcp://127.0.0.1:{free_port()}"
    r0, r1 = manual(2, init, TOY + ["--debug-exit-rank", "1", "--debug-exit-step", "3", "--pg-timeout", "20"])
    assert r1.returncode == 17  # the simulated crash
    assert r0.returncode >= 128, (r0.returncode, r0.stderr[-2000:])
    assert "retryable" in r0.stderr


def test_master_that_never_answers_fails_fast():
    port = free_port()  # nothing listens there
    p = run(TOY + ["--connect-timeout", "1.5"], RANK=1, WORLD_SIZE=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
            timeout=30)
    assert p.returncode == 128
    assert f"MASTER_ADDR:MASTER_PORT = 127.0.0.1:{port}" in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    p = run(TOY + ["--init-method", f"tcp://127.0.0.1:{port}", "--rank", "1", "--world-size", "2",
                   "--connect-timeout", "1"], timeout=30)
    assert p.returncode == 128 and f"127.0.0.1:{port}" in p.stderr


def test_profile_dir_writes_a_trace_per_rank(tmp_path):
    """--profile-dir: torch.profiler over --profile-steps steps of the timed window on every rank; the traces
    are what benchmarks/trace_breakdown.py reads (a CPU trace has no GPU activity, which it says)."""
    d = tmp_path / "prof"
    s = summary(ok(torchrun(2, TOY + ["--no-eval", "--profile-dir", str(d), "--profile-steps", "3"])[0]))
    assert s["sync_check"] == "pass" and s["steps"] == 16
    for rank in (0, 1):
        with gzip.open(d / f"trace-rank{rank}.json.gz", "rt") as f:
            events = json.load(f)["traceEvents"]
        assert any(e.get("cat") == "cpu_op" and e.get("name") == "aten::convolution" for e in events)
        assert (d / f"kernels-rank{rank}.txt").read_text().startswith("3 steps (global steps 9-11)")
    assert not list(d.glob("*.json"))  # only the gzipped traces stay
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trace_breakdown.py"), str(d)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "prof/rank1 | no GPU activity" in r.stdout, r.stdout + r.stderr


def test_compile_if_repaid_decision_is_in_the_first_log_line():
    """The auto compile rule (default) on CPU: eager (no CUDA graph), so no compile and nothing about it in the
    first line; --no-compile-if-repaid is accepted."""
    for extra in ([], ["--no-compile-if-repaid"]):
        r = ok(run(TOY + ["--epochs", "1", "--no-eval", *extra]))
        first = r.stdout.splitlines()[0]
        assert first.startswith("ddp-train: step: eager (op by op): CUDA graphs need a GPU | "), first
        assert summary(r)["compile"] is False
