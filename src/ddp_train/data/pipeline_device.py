"""``--data-pipeline device`` (the default): batches gathered, augmented and normalised on the device."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ddp_train.data.datasets import Split
from ddp_train.data.position import epoch_steps, steps_per_epoch
from ddp_train.data.sharding import reshard_indices, shard_indices, step_seed


class DevicePipeline:
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
        # the next epoch's sample indices, dealt while this epoch trains: (epoch, indices on the host) or None
        self.ahead = None

    def __len__(self):
        return self.steps

    def epoch_steps(self, segment=None):
        """Steps in an epoch: all of it (segment None), or one re-dealt from (start sample, start step)."""
        return epoch_steps(self.split.length, self.world, self.batch, segment)

    def deal(self, epoch):
        """This rank's sample indices of a whole ``epoch`` (on the host): the ones dealt ahead when they are that
        epoch's, else dealt now."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None and ahead[0] == epoch:
            return ahead[1]
        return shard_indices(self.split.length, self.world, self.rank, epoch, self.seed)

    def epoch(self, epoch, start_step=0, segment=None):
        """This rank's batches of ``epoch`` from ``start_step`` (a step of the epoch). ``segment``: (start sample,
        start step) when the epoch was re-dealt at that point by an elastic resume (see reshard_indices).

        Once the first batch is out, the next epoch's indices are dealt (a permutation of the whole split on the
        host: milliseconds for CIFAR's 50,000 samples) while the device runs this epoch's first step, so the
        next epoch starts without the device waiting for it."""
        if segment is None:
            idx = self.deal(epoch)
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
            yield self._augment(b, step_seed(self.seed, epoch, step, self.rank)), self.labels[b]
            if self.ahead is None:
                self.ahead = (epoch + 1, self.deal(epoch + 1))

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
