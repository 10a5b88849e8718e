"""Data sets (synthetic and real). The input pipelines that batch them:

* ``pipeline_device.DevicePipeline`` (``--data-pipeline device``, the default): the whole split lives on the
  training device as uint8; batches are gathered, randomly cropped (with padding) and flipped there in one
  indexing op, then normalised.
* ``pipeline_dataloader.DataloaderPipeline`` (``--data-pipeline dataloader``): a ``torch.utils.data.DataLoader``
  with per-sample decode and augmentation on the CPU (PIL when installed), worker processes and pinned memory.
* ``pipeline_classic.ClassicPipeline`` (``--data-pipeline classic``): the reference input pipeline the
  benchmarks compare with (a plain torchvision script's way).

The pipelines draw the same shards (``sharding``): every rank gets a disjoint slice of one permutation per epoch
(``torch.utils.data.DistributedSampler`` semantics: padded by wrapping so all ranks take the same number
of steps), reshuffled per epoch from ``seed + epoch``. Augmentation randomness is derived from
(seed, epoch, step, rank) or (seed, epoch, index), never from a global RNG, so a resumed run sees
exactly the batches an uninterrupted one would have.
"""

from __future__ import annotations

import gzip
import math
import os
import pickle
import struct
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ddp_train.config.run_config import RunConfig
from ddp_train.data.position import steps_per_epoch
from ddp_train.errors import EXIT_DATA, EXIT_USAGE, TrainError
from ddp_train.visible import bounded

NORMALIZATION = {
    "toy": ((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
    "mnist": ((0.1307,), (0.3081,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "imagenet-synthetic": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}


@dataclass
class Split:
    """``length`` samples; sample i is ``images[i % len(images)]`` (a pool when length > len(images))."""

    images: torch.Tensor  # uint8 [P, C, H, W]
    labels: torch.Tensor  # int64 [P]
    length: int
    source: str  # "synthetic" or the files it came from

    @property
    def pool(self) -> int:
        return int(self.images.shape[0])


# ----------------------------------------------------------------------------------------- synthetic
def _templates(shape, num_classes, seed, device):
    """One smooth, left-right symmetric pattern per class (robust to small crops and flips)."""
    c, h, w = shape
    g = torch.Generator(device="cpu").manual_seed(10_007 * seed + 17)
    grid = torch.rand(num_classes, c, 4, 4, generator=g)
    grid = (grid + grid.flip(-1)) / 2
    color = torch.rand(num_classes, c, 1, 1, generator=g)
    t = F.interpolate(grid, size=(h, w), mode="bilinear", align_corners=False)
    t = 128.0 + 90.0 * (t - 0.5) * 2 * 0.6 + 90.0 * (color - 0.5) * 0.8
    return t.to(device)


def make_synthetic(shape, num_classes, length, pool, seed, split, device) -> Split:
    """Learnable synthetic images: class template + per-sample noise and brightness, as uint8."""
    n = length if not pool else min(pool, length)
    templates = _templates(shape, num_classes, seed, device)
    g = torch.Generator(device=device).manual_seed(1_000_003 * seed + (0 if split == "train" else 1))
    labels = torch.randint(0, num_classes, (n,), generator=g, device=device)
    images = torch.empty((n, *shape), dtype=torch.uint8, device=device)
    chunk = max(1, (1 << 24) // (shape[0] * shape[1] * shape[2]))
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        noise = torch.randn((e - s, *shape), generator=g, device=device) * 40.0
        shift = (torch.rand((e - s, 1, 1, 1), generator=g, device=device) - 0.5) * 40.0
        images[s:e] = (templates[labels[s:e]] + noise + shift).clamp_(0, 255).to(torch.uint8)
    return Split(images, labels.long(), length, "synthetic")


# ----------------------------------------------------------------------------------------- real data
class _NpDtype:
    def __init__(self, name, *args):
        self.name = name

    def __setstate__(self, state):
        self.state = state


class _NpArray:
    def __init__(self, *args):
        self.shape, self.dtype, self.raw = None, None, None

    def __setstate__(self, state):
        _, self.shape, self.dtype, _, self.raw = state


class _CifarUnpickler(pickle.Unpickler):
    """Reads the CIFAR-10 python batches without numpy, and refuses any other class (safe on untrusted files)."""

    def find_class(self, module, name):
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name == "_reconstruct":
            return lambda cls, shape, dtype: cls()
        if module == "numpy" and name == "ndarray":
            return _NpArray
        if module == "numpy" and name == "dtype":
            return _NpDtype
        if module == "_codecs" and name == "encode":  # bytes in protocol-2 pickles written by Python 3
            import codecs

            return codecs.encode
        raise pickle.UnpicklingError(f"unexpected object {bounded(module)}.{bounded(name)}")


def _cifar_batch(path):
    try:
        with open(path, "rb") as f:
            d = _CifarUnpickler(f, encoding="bytes").load()
        data, labels = d[b"data"], d[b"labels"]
        if not isinstance(data, _NpArray) or data.dtype.name not in ("u1", "uint8"):
            raise ValueError("'data' is not a uint8 array")
        raw = data.raw if isinstance(data.raw, (bytes, bytearray)) else bytes(data.raw)
        n = len(labels)
        if tuple(data.shape) != (n, 3072) or len(raw) != n * 3072:
            raise ValueError(f"'data' has shape {tuple(data.shape)}, expected ({n}, 3072)")
        images = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(n, 3, 32, 32)
        labels = torch.tensor([int(x) for x in labels], dtype=torch.long)
        if n and (labels.min() < 0 or labels.max() > 9):
            raise ValueError("labels outside 0..9")
        return images, labels
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise TrainError(f"corrupt CIFAR-10 batch {path}: {bounded(exc, 400)}; re-extract cifar-10-python.tar.gz "
                         "into --data-dir",
                         EXIT_DATA) from None


def _find_dir(data_dir, probe_names, subdirs):
    if not os.path.isdir(data_dir):
        raise TrainError(f"--data-dir {data_dir} does not exist; point it at the extracted data set "
                         "(ddp-train never downloads) or drop --data-dir for synthetic data", EXIT_DATA)
    for sub in ("",) + subdirs:
        d = os.path.join(data_dir, sub)
        if any(os.path.exists(os.path.join(d, n)) or os.path.exists(os.path.join(d, n + ".gz")) for n in probe_names):
            return os.path.normpath(d)
    return data_dir


def load_cifar10(data_dir):
    d = _find_dir(data_dir, ("data_batch_1", "test_batch"), ("cifar-10-batches-py",))
    out = {}
    for split, names in (("train", [f"data_batch_{i}" for i in range(1, 6)]), ("test", ["test_batch"])):
        imgs, labs = [], []
        for n in names:
            path = os.path.join(d, n)
            if not os.path.isfile(path):
                raise TrainError(f"missing CIFAR-10 file {path}; extract cifar-10-python.tar.gz into --data-dir "
                                 "(ddp-train never downloads)", EXIT_DATA)
            i, lab = _cifar_batch(path)
            imgs.append(i)
            labs.append(lab)
        images, labels = torch.cat(imgs), torch.cat(labs)
        out[split] = Split(images, labels, len(labels), d)
    return out


def _read_maybe_gz(path):
    for p in (path, path + ".gz"):
        if os.path.isfile(p):
            try:
                with open(p, "rb") as f:
                    raw = f.read()
                return p, (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise TrainError(f"corrupt MNIST file {p}: {bounded(exc)}; re-download it into --data-dir",
                                 EXIT_DATA) from None
    raise TrainError(f"missing MNIST file {path}[.gz]; put the idx files in --data-dir (ddp-train never downloads)",
                     EXIT_DATA)


def _idx(path, magic, ndim):
    p, raw = _read_maybe_gz(path)
    try:
        if len(raw) < 4 + 4 * ndim:
            raise ValueError("file shorter than its header")
        m = struct.unpack(">I", raw[:4])[0]
        if m != magic:
            raise ValueError(f"magic number {m:#010x}, expected {magic:#010x}")
        dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
        body = raw[4 + 4 * ndim:]
        if len(body) != math.prod(dims):
            raise ValueError(f"{len(body)} data bytes, header says {math.prod(dims)} (truncated?)")
        return torch.frombuffer(bytearray(body), dtype=torch.uint8).view(*dims)
    except ValueError as exc:
        raise TrainError(f"corrupt MNIST file {p}: {exc}; re-download it into --data-dir", EXIT_DATA) from None


def load_mnist(data_dir):
    d = _find_dir(data_dir, ("train-images-idx3-ubyte",), ("MNIST/raw", "raw", "mnist"))
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = _idx(os.path.join(d, f"{prefix}-images-idx3-ubyte"), 0x803, 3)
        labels = _idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte"), 0x801, 1).long()
        if images.shape[0] != labels.shape[0]:
            raise TrainError(f"MNIST {split} split: {images.shape[0]} images but {labels.shape[0]} labels in {d}; "
                             "re-download the idx files", EXIT_DATA)
        if labels.numel() and labels.max() > 9:
            raise TrainError(f"MNIST {split} labels outside 0..9 in {d}; re-download the idx files", EXIT_DATA)
        out[split] = Split(images.unsqueeze(1).contiguous(), labels, labels.shape[0], d)
    return out


def load_splits(config: RunConfig, shape, num_classes, device) -> dict[str, Split]:
    if config.data_dir:
        splits = load_cifar10(config.data_dir) if config.workload == "cifar10" else load_mnist(config.data_dir)
        return {k: Split(v.images.to(device), v.labels.to(device), v.length, v.source) for k, v in splits.items()}
    pool = config.synthetic_pool
    return {
        "train": make_synthetic(shape, num_classes, config.train_size, pool, config.seed, "train", device),
        "test": make_synthetic(shape, num_classes, config.test_size, pool and max(1, pool // 4), config.seed, "test", device),
    }


def check_batch(length, world, batch, split="train"):
    if steps_per_epoch(length, world, batch) < 1:
        raise TrainError(f"the {split} split has {length} samples, fewer than one batch of {batch} per rank for "
                         f"{world} rank(s); lower --batch-size or raise --train-size", EXIT_USAGE)
