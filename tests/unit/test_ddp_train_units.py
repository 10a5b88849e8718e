"""ddp_train pieces in-process: sharding, GPU-style batched augmentation, data formats and their errors,
checkpoints, checksums, models, argument errors and exit codes."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct

import pytest
import torch

from ddp_train.__main__ import main
from ddp_train.checkpoint import storage as checkpoint
from ddp_train.comm import sync
from ddp_train.data import datasets as data
from ddp_train.data import sharding
from ddp_train.data.pipeline_dataloader import DataloaderPipeline
from ddp_train.data.pipeline_device import DevicePipeline
from ddp_train.errors import EXIT_DATA, EXIT_DEPENDENCY, EXIT_LOST_PEER, EXIT_USAGE, TrainError, classify
from ddp_train.model.networks import PyramidNet, ResNet18Cifar, ResNet50, build_model

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ sharding
@pytest.mark.parametrize("length,world", [(100, 3), (64, 4), (7, 2)])
def test_shards_are_disjoint_cover_everything_and_reshuffle(length, world):
    shards = [sharding.shard_indices(length, world, r, epoch=0, seed=1) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # equal step counts on every rank
    flat = torch.cat(shards).tolist()
    assert set(flat) == set(range(length))
    assert len(flat) - len(set(flat)) == len(flat) - length  # only the wrap-around padding repeats
    if length % world == 0:
        assert len(set(flat)) == len(flat)
    again = sharding.shard_indices(length, world, 0, epoch=0, seed=1)
    assert torch.equal(again, shards[0])
    assert not torch.equal(sharding.shard_indices(length, world, 0, epoch=1, seed=1), shards[0])


def test_batched_crop_and_flip_are_windows_of_the_padded_image():
    imgs = torch.randint(0, 255, (16, 3, 8, 8), dtype=torch.uint8)
    split = data.Split(imgs, torch.zeros(16, dtype=torch.long), 16, "t")
    ld = DevicePipeline(split, batch=16, rank=0, world=1, seed=3, pad=2, flip=True, augment=True,
                           mean=(0, 0, 0), std=(1 / 255,) * 3, channels_last=False, out_dtype=torch.float32,
                           device="cpu")
    (x, _), = list(ld.epoch(0))
    idx = sharding.shard_indices(16, 1, 0, 0, 3)
    padded = torch.nn.functional.pad(imgs, (2, 2, 2, 2))
    flips = 0
    for out, i in zip(x, idx.tolist(), strict=True):
        out = out.round().to(torch.uint8)
        windows = [padded[i, :, dy:dy + 8, dx:dx + 8] for dy in range(5) for dx in range(5)]
        plain = any(torch.equal(out, w) for w in windows)
        mirrored = any(torch.equal(out, w.flip(-1)) for w in windows)
        assert plain or mirrored
        flips += mirrored and not plain
    assert 0 < flips < 16
    (x2, _), = list(ld.epoch(0))
    assert torch.equal(x, x2)  # derived from (seed, epoch, step, rank): repeatable


def test_dataloader_pipeline_yields_the_device_pipelines_shards_and_normalisation():
    imgs = torch.randint(0, 255, (40, 3, 8, 8), dtype=torch.uint8)
    labels = torch.arange(40) % 10
    split = data.Split(imgs, labels, 40, "t")
    kw = dict(batch=8, rank=1, world=2, seed=0, pad=0, flip=False, augment=False, mean=(0.5,) * 3,
              std=(0.25,) * 3, channels_last=False, device="cpu")
    device = list(DevicePipeline(split, out_dtype=torch.float32, **kw).epoch(2))
    dataloader = list(DataloaderPipeline(split, out_dtype=torch.float32, workers=0, **kw).epoch(2))
    assert len(device) == len(dataloader) == 2
    for (xd, yd), (xl, yl) in zip(device, dataloader, strict=True):
        assert torch.equal(yd, yl) and torch.allclose(xd, xl, atol=1e-5)


def test_synthetic_data_is_deterministic_and_class_dependent():
    a = data.make_synthetic((3, 32, 32), 10, 200, 0, 0, "train", "cpu")
    b = data.make_synthetic((3, 32, 32), 10, 200, 0, 0, "train", "cpu")
    assert torch.equal(a.images, b.images) and a.images.dtype == torch.uint8
    means = torch.stack([a.images[a.labels == c].float().mean(0) for c in range(10)])
    assert (means[0] - means[1]).abs().mean() > 5  # classes look different: learnable


# ------------------------------------------------------------------------------------------ real data
def write_cifar(d, n=10, bad=None):
    import numpy as np

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8), b"labels": [int(x) for x in rng.integers(0, 10, n)],
                 b"batch_label": name.encode()}
        (d / name).write_bytes(pickle.dumps(batch, protocol=2))
    if bad:
        (d / bad).write_bytes(b"\x80\x02not a pickle at all")


def test_cifar10_python_batches_load_without_numpy_at_runtime(tmp_path):
    import numpy as np

    write_cifar(tmp_path / "cifar-10-batches-py")
    splits = data.load_cifar10(str(tmp_path))  # finds the sub-folder
    assert splits["train"].images.shape == (50, 3, 32, 32) and splits["test"].length == 10
    raw = pickle.loads((tmp_path / "cifar-10-batches-py" / "data_batch_1").read_bytes())
    assert torch.equal(splits["train"].images[:10].reshape(10, -1), torch.from_numpy(np.asarray(raw[b"data"])))


def test_training_on_real_cifar_files(tmp_path, capsys):
    write_cifar(tmp_path, n=40)
    code = main(["--workload", "cifar10", "--data-dir", str(tmp_path), "--model", "toy-cnn", "--batch-size", "20",
                 "--epochs", "1", "--strategy", "single", "--quiet"])
    s = last_json(capsys.readouterr().out)
    assert code == 0 and s["data"].endswith(str(tmp_path)) and s["train_samples"] == 200 and s["steps"] == 10


def write_mnist(d, n=30, gz=True, truncate=False):
    d.mkdir(parents=True, exist_ok=True)
    for prefix in ("train", "t10k"):
        imgs = struct.pack(">IIII", 0x803, n, 28, 28) + bytes(range(256)) * (n * 784 // 256) + bytes(n * 784 % 256)
        labs = struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))
        if truncate and prefix == "train":
            imgs = imgs[:-100]
        for name, raw in ((f"{prefix}-images-idx3-ubyte", imgs), (f"{prefix}-labels-idx1-ubyte", labs)):
            (d / (name + (".gz" if gz else ""))).write_bytes(gzip.compress(raw) if gz else raw)


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_files_gz_or_not(tmp_path, gz):
    write_mnist(tmp_path / "MNIST" / "raw", gz=gz)
    s = data.load_mnist(str(tmp_path))
    assert s["train"].images.shape == (30, 1, 28, 28) and s["test"].labels.tolist()[:3] == [0, 1, 2]


@pytest.mark.parametrize("case", ["missing-dir", "missing-file", "corrupt-cifar", "truncated-mnist", "bad-gzip"])
def test_missing_or_corrupt_data_exits_3_with_one_line(tmp_path, capsys, case):
    wl = "cifar10"
    if case == "missing-dir":
        d = tmp_path / "nope"
    elif case == "missing-file":
        write_cifar(tmp_path)
        os.remove(tmp_path / "data_batch_3")
        d = tmp_path
    elif case == "corrupt-cifar":
        write_cifar(tmp_path, bad="data_batch_2")
        d = tmp_path
    else:
        wl = "mnist"
        write_mnist(tmp_path, truncate=case == "truncated-mnist")
        if case == "bad-gzip":
            (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b\x08garbage")
        d = tmp_path
    code = main(["--workload", wl, "--data-dir", str(d), "--strategy", "single", "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_DATA
    assert err.count("\n") == 1 and err.startswith("ddp-train: error: ") and "Traceback" not in err
    expect = {"missing-dir": "does not exist", "missing-file": "missing CIFAR-10 file", "corrupt-cifar": "corrupt CIFAR-10",
              "truncated-mnist": "truncated", "bad-gzip": "corrupt MNIST"}[case]
    assert expect in err and "never download" in err or "re-" in err


# ------------------------------------------------------------------------------------------ checkpoints
def payload(step, value=1.0):
    return {"model": {"w": torch.full((3,), value)}, "optimizer": {}, "scheduler": {}, "epoch": 0, "step": step,
            "step_in_epoch": step, "config": {"workload": "toy"}}


def test_checkpoint_roundtrip_keep_and_newest_valid(tmp_path):
    for s in (1, 2, 3, 4):
        checkpoint.save(str(tmp_path), payload(s, s), keep=3)
    names = [os.path.basename(p) for p in checkpoint.list_checkpoints(str(tmp_path))]
    assert names == ["ckpt-00000002.pt", "ckpt-00000003.pt", "ckpt-00000004.pt"]
    path, skipped = checkpoint.newest_valid(str(tmp_path))
    assert path.endswith("ckpt-00000004.pt") and not skipped
    assert torch.equal(checkpoint.load(path)["model"]["w"], torch.full((3,), 4.0))


@pytest.mark.parametrize("damage", ["truncate", "no-sidecar", "flip-byte"])
def test_damaged_newest_checkpoint_is_skipped_never_loaded(tmp_path, damage):
    checkpoint.save(str(tmp_path), payload(1))
    p2 = checkpoint.save(str(tmp_path), payload(2, 2.0))
    raw = open(p2, "rb").read()
    if damage == "truncate":
        open(p2, "wb").write(raw[: len(raw) // 2])
    elif damage == "no-sidecar":
        os.remove(p2 + ".json")
    else:
        open(p2, "wb").write(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    path, skipped = checkpoint.newest_valid(str(tmp_path))
    assert path.endswith("ckpt-00000001.pt") and skipped[0][0] == p2
    with pytest.raises(TrainError) as e:
        checkpoint.load(p2)
    assert e.value.code == 5


def test_resume_explicit_bad_checkpoint_exits_5(tmp_path, capsys):
    bogus = tmp_path / "ckpt-00000001.pt"
    bogus.write_bytes(b"junk")
    assert main(TINY + ["--resume", str(bogus)]) == 5
    assert "not usable" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ checksums
def test_checksum_sees_a_single_bit_flip():
    t = torch.randn(1000)
    u = t.clone()
    u.view(torch.int32)[417] ^= 1
    a = sync.tensor_checksums([("t", t)])
    b = sync.tensor_checksums([("t", u)])
    assert not torch.equal(a, b)
    assert torch.equal(a, sync.tensor_checksums([("t", t.clone())]))
    for dt in (torch.bfloat16, torch.int64, torch.uint8):
        x = torch.ones(7).to(dt)
        assert sync.tensor_checksums([("x", x)]).shape == (1, 2)


def test_compare_state_dicts():
    a = {"w": torch.ones(3), "b": torch.zeros(2)}
    assert sync.compare_state_dicts(a, {k: v.clone() for k, v in a.items()})["identical_or_within_atol"]
    r = sync.compare_state_dicts(a, {"w": torch.ones(3) + 1e-3, "c": torch.zeros(1)})
    assert r["differ"] == ["w"] and r["only_in_a"] == ["b"] and r["only_in_b"] == ["c"]
    assert sync.compare_state_dicts(a, {"w": torch.ones(3) + 1e-3, "b": a["b"]}, atol=1e-2)["identical_or_within_atol"]


# ------------------------------------------------------------------------------------------ models
def test_models_shapes_and_sizes():
    assert sum(p.numel() for p in ResNet18Cifar().parameters()) == 11_173_962
    assert sum(p.numel() for p in ResNet50().parameters()) == 25_557_032  # same as torchvision's resnet50
    assert 1.6e6 < sum(p.numel() for p in PyramidNet().parameters()) < 1.8e6
    with torch.no_grad():
        for name, shape in (("toy-cnn", (3, 32, 32)), ("mnist-cnn", (1, 28, 28)), ("resnet18", (3, 32, 32)),
                            ("pyramidnet", (3, 32, 32)), ("resnet50", (3, 64, 64))):
            m = build_model(name, shape, 10).eval()
            assert m(torch.zeros(2, *shape)).shape == (2, 10)


def test_torchvision_model_without_torchvision_exits_6(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "torchvision", None)
    assert main(TINY + ["--model", "torchvision-resnet18"]) == EXIT_DEPENDENCY
    assert "needs torchvision" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ CLI
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


def test_nccl_refusing_its_settings_is_permanent_not_a_lost_peer():
    """NCCL_ALGO=Tree on a 4-GPU H200 host: NCCL answers the first collective with 'invalid usage' (seen on a 4x H200
    machine); a restart would fail the same way, so it is a usage error, not a lost peer (129). The
    exception is built here as torch raises it (no NCCL on this machine)."""
    import torch.distributed as dist

    exc = dist.DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:3780, invalid usage (run with NCCL_DEBUG=WARN "
                                "for details), NCCL version 2.28.9")
    assert classify(exc) == EXIT_USAGE
    assert classify(dist.DistBackendError("NCCL error in: x.cpp:1, remote process exited or there was a network "
                                          "error, NCCL version 2.28.9")) == EXIT_LOST_PEER


def test_classify_retryable_errors():
    assert classify(RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:1234")) == EXIT_LOST_PEER
    assert classify(ConnectionResetError()) == EXIT_LOST_PEER
    assert classify(ValueError("bug")) == 1
