"""ddp_train.data.pipeline_dataloader: the same shards and normalisation as the device pipeline."""

from __future__ import annotations

import torch

from ddp_train.data import datasets as data
from ddp_train.data.pipeline_dataloader import DataloaderPipeline
from ddp_train.data.pipeline_device import DevicePipeline


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
