"""Cross-rank consistency: a checksum of every parameter and buffer compared across ranks, and
checkpoint-to-checkpoint comparison (``ddp-train compare``)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

_BN_STATS = ("running_mean", "running_var", "num_batches_tracked")


def tensor_checksums(named) -> torch.Tensor:
    """[n, 2] int64: exact bit checksums (plain and position-weighted sums of the raw words) per tensor."""
    rows = []
    for _, t in named:
        t = t.detach()
        if t.numel() == 0:
            rows.append(torch.zeros(2, dtype=torch.int64, device=t.device))
            continue
        flat = t.contiguous().view(-1)
        nbytes = flat.numel() * flat.element_size()
        words = flat.view(torch.uint8)
        if nbytes % 4 == 0:
            words = words.view(torch.int32)
        w = words.to(torch.int64)
        pos = torch.arange(w.numel(), device=w.device, dtype=torch.int64) % 65521 + 1
        rows.append(torch.stack([w.sum(), (w * pos).sum()]))
    if not rows:
        return torch.zeros(0, 2, dtype=torch.int64)
    return torch.stack(rows)


def is_bn_stat(module: nn.Module, name: str) -> bool:
    owner_name, _, leaf = name.rpartition(".")
    if leaf not in _BN_STATS:
        return False
    owner = module.get_submodule(owner_name) if owner_name else module
    return isinstance(owner, nn.modules.batchnorm._NormBase)


def check(module: nn.Module, sync_bn: bool, group=None) -> dict:
    """Collective: every rank calls it. Returns (on every rank) the verdict and the names that differ."""
    named = list(module.named_parameters()) + list(module.named_buffers())
    world = dist.get_world_size(group)
    mine = tensor_checksums(named)
    device = mine.device if mine.numel() else torch.device("cpu")
    if dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    mine = mine.to(device)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine, group=group)
    allr = torch.stack(gathered).cpu()  # [world, n, 2]
    differs = (allr != allr[0:1]).any(dim=2).any(dim=0).tolist()
    params = {n for n, _ in module.named_parameters()}
    mismatched, bn_drift, other_buffers = [], [], []
    for (name, _), bad in zip(named, differs, strict=True):
        if not bad:
            continue
        if name in params:
            mismatched.append(name)
        elif is_bn_stat(module, name):
            (mismatched if sync_bn else bn_drift).append(name)
        else:
            other_buffers.append(name)
    mismatched += other_buffers
    return {
        "result": "fail" if mismatched else "pass",
        "tensors": len(named),
        "mismatched": mismatched,
        "bn_stats_drift": bn_drift,  # expected without --sync-bn: each rank updates BN stats from its own batches
    }


def compare_state_dicts(a: dict, b: dict, atol: float = 0.0) -> dict:
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    differ, shape = [], []
    max_diff = 0.0
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if not (torch.is_tensor(x) and torch.is_tensor(y)):
            if x != y:
                differ.append(k)
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            shape.append(f"{k}: {tuple(x.shape)}/{x.dtype} vs {tuple(y.shape)}/{y.dtype}")
            continue
        if torch.equal(x, y):
            continue
        d = (x.double() - y.double()).abs().max().item() if x.numel() else 0.0
        max_diff = max(max_diff, d)
        if d > atol or not x.is_floating_point():
            differ.append(k)
    same = not (only_a or only_b or differ or shape)
    return {"identical_or_within_atol": same, "tensors": len(set(a) | set(b)), "differ": differ,
            "shape_or_dtype": shape, "only_in_a": only_a, "only_in_b": only_b, "max_abs_diff": max_diff}
