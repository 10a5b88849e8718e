"""ddp_train.data.datasets: synthetic data, CIFAR-10 python batches and MNIST idx files (.gz or not), a real
training run on them, and missing or corrupt data (exit 3, one line)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct

import pytest
import torch

from ddp_train.__main__ import main
from ddp_train.data import datasets as data
from ddp_train.errors import EXIT_DATA


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


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


def write_mnist(d, n=30, gz=True, truncate=False):
    d.mkdir(parents=True, exist_ok=True)
    for prefix in ("train", "t10k"):
        imgs = struct.pack(">IIII", 0x803, n, 28, 28) + bytes(range(256)) * (n * 784 // 256) + bytes(n * 784 % 256)
        labs = struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n))
        if truncate and prefix == "train":
            imgs = imgs[:-100]
        for name, raw in ((f"{prefix}-images-idx3-ubyte", imgs), (f"{prefix}-labels-idx1-ubyte", labs)):
            (d / (name + (".gz" if gz else ""))).write_bytes(gzip.compress(raw) if gz else raw)


def test_synthetic_data_is_deterministic_and_class_dependent():
    a = data.make_synthetic((3, 32, 32), 10, 200, 0, 0, "train", "cpu")
    b = data.make_synthetic((3, 32, 32), 10, 200, 0, 0, "train", "cpu")
    assert torch.equal(a.images, b.images) and a.images.dtype == torch.uint8
    means = torch.stack([a.images[a.labels == c].float().mean(0) for c in range(10)])
    assert (means[0] - means[1]).abs().mean() > 5  # classes look different: learnable


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


def test_a_cifar_batch_naming_a_hostile_module_is_one_bounded_line_with_its_controls_escaped(tmp_path, capsys):
    write_cifar(tmp_path)
    evil = "\x1b]0;pwned\x07\x1b[2J" + "A" * 5000
    # protocol 4: STACK_GLOBAL of two BINUNICODE strings, module ``evil`` and name "x"
    unicode = b"".join(b"X" + struct.pack("<I", len(t.encode())) + t.encode() for t in (evil, "x"))
    (tmp_path / "data_batch_1").write_bytes(b"\x80\x04" + unicode + b"\x93.")
    code = main(["--workload", "cifar10", "--data-dir", str(tmp_path), "--strategy", "single", "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_DATA and err.count("\n") == 1 and "Traceback" not in err
    assert "\x1b" not in err and "\x07" not in err and len(err) < 1000, err
    assert "unexpected object \\x1b]0;pwned\\x07\\x1b[2JAAA" in err and "more characters" in err
