"""ddp_train.data.pipeline_device: batched random crop and flip are windows of the padded image."""

from __future__ import annotations

import torch

from ddp_train.data import datasets as data
from ddp_train.data import sharding
from ddp_train.data.pipeline_device import DevicePipeline


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


def _pipeline(split, rank=0, world=2):
    return DevicePipeline(split, batch=4, rank=rank, world=world, seed=5, pad=2, flip=True, augment=True,
                          mean=(0, 0, 0), std=(1 / 255,) * 3, channels_last=False, out_dtype=torch.float32,
                          device="cpu")


def test_the_next_epoch_is_dealt_ahead_and_changes_no_batch():
    """Once an epoch's first batch is out the pipeline holds the next epoch's indices (dealt while the device runs
    that step); epochs taken in order, out of order, or by a fresh pipeline give the same batches, and the
    indices dealt ahead are the ones shard_indices gives (DistributedSampler semantics, 2 ranks, 25 samples:
    padded to 26, 13 a rank, 3 batches of 4)."""
    imgs = torch.randint(0, 255, (25, 3, 8, 8), dtype=torch.uint8)
    split = data.Split(imgs, torch.arange(25), 25, "t")
    ld = _pipeline(split, rank=1)
    it = ld.epoch(0)
    assert ld.ahead is None
    first = next(it)
    assert ld.ahead is None  # the first batch goes out before any dealing ahead
    second = next(it)
    assert ld.ahead[0] == 1 and torch.equal(ld.ahead[1], sharding.shard_indices(25, 2, 1, 1, 5))
    in_order = [[first, second, *it]] + [list(ld.epoch(e)) for e in (1, 2)]
    assert ld.ahead[0] == 3
    skipped = list(ld.epoch(7))  # not the epoch dealt ahead: dealt now
    fresh = [list(_pipeline(split, rank=1).epoch(e)) for e in (0, 1, 2, 7)]
    for got, want in zip(in_order + [skipped], fresh, strict=True):
        assert len(got) == len(want) == 3
        for (x, y), (x2, y2) in zip(got, want, strict=True):
            assert torch.equal(x, x2) and torch.equal(y, y2)
    labels = torch.cat([y for _, y in fresh[1]])
    assert torch.equal(labels, sharding.shard_indices(25, 2, 1, 1, 5)[:12])
