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
