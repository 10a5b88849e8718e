"""The run's input: the data splits and the training batches of the chosen --data-pipeline (device: the default,
batched on the device; dataloader: per-sample, seeded, DataLoader workers; classic: the reference input pipeline)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ddp_train.config.run_config import RunConfig
from ddp_train.data import datasets as data_mod
from ddp_train.data.pipeline_device import DevicePipeline


@dataclass
class Inputs:
    pipeline: str  # the --data-pipeline in use
    train_split: data_mod.Split
    test_split: data_mod.Split
    loader: object  # the training batches: len(), epoch_steps(segment), epoch(epoch, start_step, segment)
    eval_pipeline: DevicePipeline  # the test split, normalised on the device


def build(config: RunConfig, rt, defaults, *, per_rank_batch, amp_dtype, channels_last) -> Inputs:
    pipeline = "device" if config.data_pipeline == "auto" else config.data_pipeline
    data_device = rt.device if pipeline == "device" else torch.device("cpu")
    splits = data_mod.load_splits(config, defaults.shape, defaults.num_classes, data_device)
    train, test = splits["train"], splits["test"]
    data_mod.check_batch(train.length, rt.world, per_rank_batch)
    mean, std = data_mod.NORMALIZATION[config.workload]
    in_dtype = amp_dtype if (amp_dtype and rt.cuda) else torch.float32
    common = dict(batch=per_rank_batch, rank=rt.rank, world=rt.world, seed=config.seed, pad=defaults.pad,
                  flip=defaults.flip, augment=not config.no_augment, mean=mean, std=std,
                  channels_last=channels_last, device=rt.device)
    if pipeline == "device":
        loader = DevicePipeline(train, out_dtype=in_dtype, **common)
    else:
        workers = config.workers if config.workers is not None else (4 if rt.cuda else 0)
        if pipeline == "classic":
            from ddp_train.data.pipeline_classic import ClassicPipeline

            loader = ClassicPipeline(train, workers=workers, **common)
        else:
            from ddp_train.data.pipeline_dataloader import DataloaderPipeline

            loader = DataloaderPipeline(train, out_dtype=torch.float32, workers=workers, **common)
    ev = DevicePipeline(test, out_dtype=in_dtype, **{**common, "augment": False,
                                                                "batch": max(1, config.batch_size)})
    return Inputs(pipeline, train, test, loader, ev)
