"""``--data-pipeline dataloader``: per-sample decode and augmentation on the CPU in DataLoader workers, seeded
per sample, so a resumed run sees the batches an uninterrupted one would."""

from __future__ import annotations

import ctypes
import random

import torch
import torch.nn.functional as F

from ddp_train.data.datasets import Split
from ddp_train.data.position import epoch_steps, steps_per_epoch
from ddp_train.data.sharding import reshard_indices, shard_indices, step_seed

try:  # PIL is what torchvision-style pipelines decode with; optional here
    from PIL import Image as PILImage
except Exception:  # pragma: no cover - depends on the environment
    PILImage = None


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
        rng = random.Random(step_seed(self.seed, epoch, i, 0))
        p = self.pad if self.augment else 0
        dx, dy = rng.randint(0, 2 * p), rng.randint(0, 2 * p)
        flip = self.flip and self.augment and rng.random() < 0.5
        if PILImage is not None:
            img = PILImage.frombytes("RGB" if self.c == 3 else "L", (self.w, self.h), row)
            if p:
                canvas = PILImage.new(img.mode, (self.w + 2 * p, self.h + 2 * p))
                canvas.paste(img, (p, p))
                img = canvas.crop((dx, dy, dx + self.w, dy + self.h))
            if flip:
                img = img.transpose(PILImage.FLIP_LEFT_RIGHT)
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
        return epoch_steps(self.length, self.world, self.batch, segment)

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


class WorkerPipeline:
    """What the DataLoader-based pipelines share: ``self.sampler`` (a :class:`ShardBatchSampler`),
    ``self.loader`` over it, ``self.device`` and ``self.channels_last``, set by the subclass; batches are moved
    to the device in the training loop, as a plain torchvision script does."""

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


class DataloaderPipeline(WorkerPipeline):
    """DataLoader with workers and pinned memory; batches moved to the device in the training loop."""

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
