"""ddp_train.data.sharding: disjoint shards that cover everything and reshuffle, and the elastic re-deal of an
epoch's rest on the same or another world size."""

from __future__ import annotations

import pytest
import torch

from ddp_train.data import position, sharding


@pytest.mark.parametrize("length,world,batch,steps", [(512, 2, 32, 3), (100, 3, 4, 5), (96, 4, 8, 2)])
def test_redeal_at_the_same_world_size_is_the_step_based_deal(length, world, batch, steps):
    """Resuming with an unchanged world size must not change a single batch (bit-identical resumes)."""
    pos = steps * batch * world
    for r in range(world):
        old = sharding.shard_indices(length, world, r, epoch=2, seed=7)[steps * batch:]
        new = sharding.reshard_indices(length, world, r, epoch=2, seed=7, start_sample=pos)
        n = position.reshard_steps(length, world, batch, pos) * batch
        assert torch.equal(old[:n], new[:n])


@pytest.mark.parametrize("length,w1,b1,steps,w2,b2", [(512, 3, 32, 3, 2, 32), (1000, 4, 16, 7, 3, 8),
                                                        (512, 2, 32, 5, 5, 16), (100, 2, 8, 6, 3, 8)])
def test_redeal_on_another_world_sees_no_sample_twice(length, w1, b1, steps, w2, b2):
    done = torch.cat([sharding.shard_indices(length, w1, r, epoch=0, seed=3)[:steps * b1] for r in range(w1)])
    pos = steps * b1 * w1
    n = position.reshard_steps(length, w2, b2, pos)
    rest = torch.cat([sharding.reshard_indices(length, w2, r, epoch=0, seed=3, start_sample=pos)[:n * b2]
                      for r in range(w2)])
    seen = torch.cat([done, rest]).tolist()
    assert len(seen) == len(set(seen))
    assert 0 <= (length - pos) - n * b2 * w2 < w2 * b2  # all of the rest but a tail shorter than a global batch


@pytest.mark.parametrize("length,world", [(100, 3), (64, 4), (7, 2)])
def test_shards_are_disjoint_cover_everything_and_reshuffle(length, world):
    shards = [sharding.shard_indices(length, world, r, epoch=0, seed=1) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # equal step counts on every rank
    flat = torch.cat(shards).tolist()
    assert set(flat) == set(range(length))
    assert len(flat) - len(set(flat)) == len(flat) - length  # only the wrap-around padding repeats
    if length % world == 0:
        assert len(set(flat)) == len(flat)
    again = sharding.shard_indices(length, world, 0, epoch=0, seed=1)
    assert torch.equal(again, shards[0])
    assert not torch.equal(sharding.shard_indices(length, world, 0, epoch=1, seed=1), shards[0])
