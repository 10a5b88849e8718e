"""The reference input pipeline (``--data-pipeline classic``) the benchmarks compare with.

What a plain torchvision training script does, step for step: a torchvision-style dataset holding the images as one HWC uint8 numpy
array (``torchvision.datasets.CIFAR10.data``), ``Image.fromarray`` per sample, then the per-sample transforms
``RandomCrop(size, padding)`` -> ``RandomHorizontalFlip()`` -> ``ToTensor()`` -> ``Normalize(mean, std)`` on the
PIL image (torchvision's own transforms when torchvision is installed; otherwise the same operations written
out below, with the same PIL/numpy/torch calls), ``DataLoader`` workers with the default prefetch and no
persistent workers (re-spawned every epoch), pinned memory, batches moved to the device in the training loop.
Random crops and flips come from each worker's torch RNG (as torchvision's do), so this pipeline is not
reproducible batch for batch; ``--data-pipeline dataloader`` is the seeded per-sample CPU pipeline.
"""

from __future__ import annotations

import numpy as np
import torch

from ddp_train.data.datasets import Split
from ddp_train.data.pipeline_dataloader import ShardBatchSampler, WorkerPipeline

try:
    from PIL import Image
except Exception:  # pragma: no cover - depends on the environment
    Image = None


def _transforms(shape, pad, flip, augment, mean, std):
    """torchvision.transforms when importable (what a plain torchvision script uses), else equivalents with the same calls."""
    c, h, w = shape
    try:
        from torchvision import transforms as T
    except Exception:
        T = None
    if T is not None:
        steps = []
        if augment and pad:
            steps.append(T.RandomCrop((h, w), padding=pad))
        if augment and flip:
            steps.append(T.RandomHorizontalFlip())
        steps += [T.ToTensor(), T.Normalize(mean, std)]
        return T.Compose(steps), "torchvision"
    return _Builtin(h, w, pad if augment else 0, flip and augment, mean, std), "builtin"


class _Builtin:
    """RandomCrop(padding) + RandomHorizontalFlip + ToTensor + Normalize as torchvision 0.2x does them on PIL."""

    def __init__(self, h, w, pad, flip, mean, std):
        self.h, self.w, self.pad, self.flip = h, w, pad, flip
        self.mean, self.std = list(mean), list(std)

    def __call__(self, img):
        if self.pad:
            canvas = Image.new(img.mode, (img.width + 2 * self.pad, img.height + 2 * self.pad))
            canvas.paste(img, (self.pad, self.pad))
            i = int(torch.randint(0, canvas.height - self.h + 1, size=(1,)).item())
            j = int(torch.randint(0, canvas.width - self.w + 1, size=(1,)).item())
            img = canvas.crop((j, i, j + self.w, i + self.h))
        if self.flip and torch.rand(1) < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        # ToTensor: HWC uint8 -> CHW float in [0, 1]
        t = torch.from_numpy(np.array(img, np.uint8, copy=True)).view(img.height, img.width, len(img.getbands()))
        t = t.permute((2, 0, 1)).contiguous().to(torch.float32).div(255)
        # Normalize: a new mean/std tensor per call, as F.normalize builds them
        mean = torch.as_tensor(self.mean, dtype=t.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=t.dtype).view(-1, 1, 1)
        return t.sub_(mean).div_(std)


class TorchvisionStyleDataset(torch.utils.data.Dataset):
    """``torchvision.datasets.CIFAR10``'s layout and ``__getitem__``: ``self.data`` (N, H, W, C) uint8 numpy,
    ``self.targets`` a list, a PIL image per sample through ``self.transform``."""

    def __init__(self, split: Split, *, pad, flip, augment, mean, std):
        if Image is None:
            raise RuntimeError("--data-pipeline classic needs Pillow")
        imgs = split.images.cpu()
        self.shape = tuple(imgs.shape[1:])
        self.data = imgs.permute(0, 2, 3, 1).contiguous().numpy()
        if self.shape[0] == 1:
            self.data = self.data[..., 0]
        self.targets = split.labels.cpu().tolist()
        self.transform, self.transforms_from = _transforms(self.shape, pad, flip, augment, mean, std)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):
        index = key[1] if isinstance(key, tuple) else key  # (epoch, index) from the shard sampler
        index %= len(self.data)
        img, target = self.data[index], self.targets[index]
        img = Image.fromarray(img)
        return self.transform(img), target


class ClassicPipeline(WorkerPipeline):
    """DataLoader over the torchvision-style dataset the way a plain torchvision script builds it (workers, pinned memory, the
    default prefetch of 2, workers re-spawned each epoch); this rank's shard and batches as every pipeline here."""

    def __init__(self, split: Split, *, batch, rank, world, seed, pad, flip, augment, mean, std, device, workers,
                 channels_last=False):
        self.sampler = ShardBatchSampler(split.length, batch=batch, rank=rank, world=world, seed=seed)
        self.dataset = TorchvisionStyleDataset(split, pad=pad, flip=flip, augment=augment, mean=mean, std=std)
        self.device = torch.device(device)
        self.channels_last = channels_last
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_sampler=self.sampler, num_workers=workers,
                                                  pin_memory=self.device.type == "cuda")
        self.steps = self.sampler.steps
