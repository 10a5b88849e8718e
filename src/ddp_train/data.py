"""Data sets (synthetic and real), per-rank sharding, and the two input pipelines.

* ``DeviceLoader`` (the fast path): the whole split lives on the training device as uint8; batches are
  gathered, randomly cropped (with padding) and flipped there in one indexing op, then normalised.
* ``build_dataloader`` (the classic path): a ``torch.utils.data.DataLoader`` with per-sample decode and
  augmentation on the CPU (PIL when installed), worker processes and pinned memory.

Both pipelines draw the same shards: every rank gets a disjoint slice of one permutation per epoch
(``torch.utils.data.DistributedSampler`` semantics: padded by wrapping so all ranks take the same number
of steps), reshuffled per epoch from ``seed + epoch``. Augmentation randomness is derived from
(seed, epoch, step, rank) or (seed, epoch, index), never from a global RNG, so a resumed run sees
exactly the batches an uninterrupted one would have.
"""

from __future__ import annotations

import ctypes
import gzip
import math
import os
import pickle
import random
import struct
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .errors import EXIT_DATA, EXIT_USAGE, TrainError

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
        raise pickle.UnpicklingError(f"unexpected object {module}.{name}")


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
        raise TrainError(f"corrupt CIFAR-10 batch {path}: {exc}; re-extract cifar-10-python.tar.gz into --data-dir",
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
                raise TrainError(f"corrupt MNIST file {p}: {exc}; re-download it into --data-dir", EXIT_DATA) from None
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


def load_splits(args, shape, num_classes, device) -> dict[str, Split]:
    if args.data_dir:
        splits = load_cifar10(args.data_dir) if args.workload == "cifar10" else load_mnist(args.data_dir)
        return {k: Split(v.images.to(device), v.labels.to(device), v.length, v.source) for k, v in splits.items()}
    pool = args.synthetic_pool
    return {
        "train": make_synthetic(shape, num_classes, args.train_size, pool, args.seed, "train", device),
        "test": make_synthetic(shape, num_classes, args.test_size, pool and max(1, pool // 4), args.seed, "test", device),
    }


# ----------------------------------------------------------------------------------------- sharding
def _epoch_perm(length, epoch, seed, shuffle=True):
    if shuffle:
        g = torch.Generator().manual_seed(seed * 1_000_033 + epoch)
        return torch.randperm(length, generator=g)
    return torch.arange(length)


def shard_indices(length, world, rank, epoch, seed, shuffle=True):
    """This rank's sample indices for ``epoch``: DistributedSampler semantics (disjoint, padded by wrapping)."""
    perm = _epoch_perm(length, epoch, seed, shuffle)
    per_rank = math.ceil(length / world)
    total = per_rank * world
    if total > length:
        perm = torch.cat([perm, perm[: total - length]])
    return perm[rank:total:world]


# Elastic resume. Step s of an epoch takes, on rank r, positions r + world * (s * batch + j) of the epoch's
# permutation, so after S steps the ranks together have consumed exactly its first S * batch * world entries,
# whatever rank did what. A run resumed with another world size or per-rank batch therefore continues from
# that position: the rest of the permutation is dealt out round-robin to the new ranks, whole global batches
# only (no padding), so no sample of the epoch is seen twice. With the same world size and batch the
# position-based deal is the same as the step-based one (tested), so nothing changes for ordinary resumes.
def reshard_indices(length, world, rank, epoch, seed, start_sample, shuffle=True):
    """This rank's indices for the rest of ``epoch`` after its first ``start_sample`` permutation entries."""
    return _epoch_perm(length, epoch, seed, shuffle)[start_sample:][rank::world]


def reshard_steps(length, world, batch, start_sample):
    """Whole global batches left in the epoch after ``start_sample`` entries (the tail is dropped)."""
    return max(0, length - start_sample) // (world * batch)


def steps_per_epoch(length, world, batch):
    return math.ceil(length / world) // batch


def check_batch(length, world, batch, split="train"):
    if steps_per_epoch(length, world, batch) < 1:
        raise TrainError(f"the {split} split has {length} samples, fewer than one batch of {batch} per rank for "
                         f"{world} rank(s); lower --batch-size or raise --train-size", EXIT_USAGE)


def _step_seed(seed, epoch, step, rank):
    return (seed * 1_000_003 + epoch * 100_003 + step) * 4099 + rank


# ----------------------------------------------------------------------------------------- fast path
class DeviceLoader:
    """Batches gathered, augmented and normalised on the device from a uint8 copy of the split."""

    def __init__(self, split: Split, *, batch, rank, world, seed, pad, flip, augment, mean, std,
                 channels_last, out_dtype, device):
        self.split, self.batch, self.rank, self.world, self.seed = split, batch, rank, world, seed
        self.pad = pad if augment else 0
        self.flip = flip and augment
        self.channels_last, self.out_dtype, self.device = channels_last, out_dtype, torch.device(device)
        imgs = split.images.to(self.device)
        self.hw = imgs.shape[-2:]
        # pre-padded once, so a random crop is a plain gather
        self.images = F.pad(imgs, (self.pad,) * 4) if self.pad else imgs
        self.labels = split.labels.to(self.device)
        c = imgs.shape[1]
        std_t = torch.tensor(std, device=self.device).view(1, c, 1, 1)
        self.scale = (1.0 / (255.0 * std_t))
        self.bias = (-torch.tensor(mean, device=self.device).view(1, c, 1, 1) / std_t)
        self.gen = torch.Generator(device=self.device)
        self.steps = steps_per_epoch(split.length, world, batch)

    def __len__(self):
        return self.steps

    def epoch_steps(self, segment=None):
        """Steps in an epoch: all of it (segment None), or one re-dealt from (start sample, start step)."""
        if segment is None:
            return self.steps
        return segment[1] + reshard_steps(self.split.length, self.world, self.batch, segment[0])

    def epoch(self, epoch, start_step=0, segment=None):
        """This rank's batches of ``epoch`` from ``start_step`` (a step of the epoch). ``segment``: (start sample,
        start step) when the epoch was re-dealt at that point by an elastic resume (see reshard_indices)."""
        if segment is None:
            idx = shard_indices(self.split.length, self.world, self.rank, epoch, self.seed)
            first = 0
        else:
            idx = reshard_indices(self.split.length, self.world, self.rank, epoch, self.seed, segment[0])
            first = segment[1]
        idx = idx.to(self.device)
        if self.split.length > self.split.pool:
            idx = idx % self.split.pool
        self.last_indices = None
        for step in range(start_step, self.epoch_steps(segment)):
            k = step - first
            b = idx[k * self.batch:(k + 1) * self.batch]
            self.last_indices = b
            yield self._augment(b, _step_seed(self.seed, epoch, step, self.rank)), self.labels[b]

    def _augment(self, b, seed):
        h, w = self.hw
        n = b.shape[0]
        dev = self.device
        if self.pad or self.flip:
            self.gen.manual_seed(seed)
            span = 2 * self.pad + 1
            dy = torch.randint(0, span, (n, 1, 1, 1), generator=self.gen, device=dev)
            dx = torch.randint(0, span, (n, 1, 1, 1), generator=self.gen, device=dev)
            rows = dy + torch.arange(h, device=dev).view(1, 1, h, 1)
            cols = torch.arange(w, device=dev).view(1, 1, 1, w)
            if self.flip:
                flip = torch.rand((n, 1, 1, 1), generator=self.gen, device=dev) < 0.5
                cols = torch.where(flip, (w - 1) - cols, cols)
            cols = dx + cols
            ch = torch.arange(self.images.shape[1], device=dev).view(1, -1, 1, 1)
            x = self.images[b.view(n, 1, 1, 1), ch, rows, cols]
        else:
            x = self.images[b]
        return self.normalize(x)

    def normalize(self, x):
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return torch.addcmul(self.bias, x.float(), self.scale).to(self.out_dtype)


def eval_batches(split: Split, rank, world, batch, normalize, device):
    """This rank's disjoint share of the test split (no padding, so every sample counts once)."""
    idx = torch.arange(rank, split.length, world, device=device)
    images, labels = split.images.to(device), split.labels.to(device)
    for s in range(0, idx.numel(), batch):
        b = idx[s:s + batch] % split.pool
        yield normalize(images[b]), labels[b]


# ----------------------------------------------------------------------------------------- classic path
try:  # PIL is what the classic torchvision pipeline decodes with; optional here
    from PIL import Image as _PILImage
except Exception:  # pragma: no cover - depends on the environment
    _PILImage = None


class SampleDataset(torch.utils.data.Dataset):
    """Per-sample decode + augment on the CPU, as torchvision's CIFAR10 + transforms does."""

    def __init__(self, split: Split, *, seed, pad, flip, augment, mean, std):
        imgs = split.images.cpu()
        self.n, self.c, self.h, self.w = imgs.shape
        hwc = imgs.permute(0, 2, 3, 1).contiguous()  # HWC rows, like the raw files
        self.raw = ctypes.string_at(hwc.data_ptr(), hwc.numel())  # one copy; bytes(storage) is per element
        self.labels = split.labels.cpu().tolist()
        self.seed, self.pad, self.flip, self.augment = seed, pad, flip, augment
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        epoch, i = key
        i = i % self.n
        size = self.h * self.w * self.c
        row = self.raw[i * size:(i + 1) * size]
        rng = random.Random(_step_seed(self.seed, epoch, i, 0))
        p = self.pad if self.augment else 0
        dx, dy = rng.randint(0, 2 * p), rng.randint(0, 2 * p)
        flip = self.flip and self.augment and rng.random() < 0.5
        if _PILImage is not None:
            img = _PILImage.frombytes("RGB" if self.c == 3 else "L", (self.w, self.h), row)
            if p:
                canvas = _PILImage.new(img.mode, (self.w + 2 * p, self.h + 2 * p))
                canvas.paste(img, (p, p))
                img = canvas.crop((dx, dy, dx + self.w, dy + self.h))
            if flip:
                img = img.transpose(_PILImage.FLIP_LEFT_RIGHT)
            t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(self.h, self.w, self.c)
        else:
            t = torch.frombuffer(bytearray(row), dtype=torch.uint8).view(self.h, self.w, self.c)
            if p:
                t = F.pad(t.permute(2, 0, 1), (p, p, p, p)).permute(1, 2, 0)[dy:dy + self.h, dx:dx + self.w]
            if flip:
                t = t.flip(1)
        x = t.permute(2, 0, 1).float().div_(255.0)
        return (x - self.mean) / self.std, self.labels[i]


class ShardBatchSampler(torch.utils.data.Sampler):
    """Yields this rank's batches of (epoch, index) keys; ``set_epoch`` as DistributedSampler."""

    def __init__(self, length, *, batch, rank, world, seed):
        self.length, self.batch, self.rank, self.world, self.seed = length, batch, rank, world, seed
        self.epoch, self.start_step, self.segment = 0, 0, None
        self.steps = steps_per_epoch(length, world, batch)

    def epoch_steps(self, segment=None):
        if segment is None:
            return self.steps
        return segment[1] + reshard_steps(self.length, self.world, self.batch, segment[0])

    def set_epoch(self, epoch, start_step=0, segment=None):
        self.epoch, self.start_step, self.segment = epoch, start_step, segment

    def __len__(self):
        return self.epoch_steps(self.segment) - self.start_step

    def __iter__(self):
        if self.segment is None:
            idx, first = shard_indices(self.length, self.world, self.rank, self.epoch, self.seed).tolist(), 0
        else:
            idx = reshard_indices(self.length, self.world, self.rank, self.epoch, self.seed, self.segment[0]).tolist()
            first = self.segment[1]
        for step in range(self.start_step, self.epoch_steps(self.segment)):
            k = step - first
            yield [(self.epoch, i) for i in idx[k * self.batch:(k + 1) * self.batch]]


class WorkerLoader:
    """What the DataLoader-based pipelines share: ``self.sampler`` (a :class:`ShardBatchSampler`),
    ``self.loader`` over it, ``self.device`` and ``self.channels_last``, set by the subclass; batches are moved
    to the device as the classic scripts do."""

    def __len__(self):
        return self.sampler.steps

    def epoch_steps(self, segment=None):
        return self.sampler.epoch_steps(segment)

    def epoch(self, epoch, start_step=0, segment=None):
        self.sampler.set_epoch(epoch, start_step, segment)
        self.last_indices = None  # not tracked through the workers (--debug-sample-log needs the device pipeline)
        for x, y in self.loader:
            x = x.to(self.device, non_blocking=True)
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            yield x, y.to(self.device, non_blocking=True)


class ClassicLoader(WorkerLoader):
    """DataLoader with workers and pinned memory; batches moved to the device as the classic scripts do."""

    def __init__(self, split: Split, *, batch, rank, world, seed, pad, flip, augment, mean, std,
                 channels_last, out_dtype, device, workers):
        self.sampler = ShardBatchSampler(split.length, batch=batch, rank=rank, world=world, seed=seed)
        ds = SampleDataset(split, seed=seed, pad=pad, flip=flip, augment=augment, mean=mean, std=std)
        self.device = torch.device(device)
        self.channels_last, self.out_dtype = channels_last, out_dtype
        self.loader = torch.utils.data.DataLoader(
            ds, batch_sampler=self.sampler, num_workers=workers, pin_memory=self.device.type == "cuda",
            persistent_workers=workers > 0, prefetch_factor=4 if workers > 0 else None)
        self.steps = self.sampler.steps
