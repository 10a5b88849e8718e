"""Which samples a rank takes: one permutation per epoch, dealt out disjointly (DistributedSampler semantics),
re-dealt after an elastic resume (position.py holds the step arithmetic), and the per-step augmentation seeds."""

from __future__ import annotations

import math

import torch


def epoch_perm(length, epoch, seed, shuffle=True):
    if shuffle:
        g = torch.Generator().manual_seed(seed * 1_000_033 + epoch)
        return torch.randperm(length, generator=g)
    return torch.arange(length)


def shard_indices(length, world, rank, epoch, seed, shuffle=True):
    """This rank's sample indices for ``epoch``: DistributedSampler semantics (disjoint, padded by wrapping)."""
    perm = epoch_perm(length, epoch, seed, shuffle)
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
    return epoch_perm(length, epoch, seed, shuffle)[start_sample:][rank::world]


def step_seed(seed, epoch, step, rank):
    return (seed * 1_000_003 + epoch * 100_003 + step) * 4099 + rank
