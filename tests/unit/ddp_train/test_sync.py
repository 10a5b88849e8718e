"""ddp_train.comm.sync: comparing two state dicts tensor by tensor; the checksum sees a single flipped bit."""

from __future__ import annotations

import torch

from ddp_train.comm import sync


def test_compare_state_dicts():
    a = {"w": torch.ones(3), "b": torch.zeros(2)}
    assert sync.compare_state_dicts(a, {k: v.clone() for k, v in a.items()})["identical_or_within_atol"]
    r = sync.compare_state_dicts(a, {"w": torch.ones(3) + 1e-3, "c": torch.zeros(1)})
    assert r["differ"] == ["w"] and r["only_in_a"] == ["b"] and r["only_in_b"] == ["c"]
    assert sync.compare_state_dicts(a, {"w": torch.ones(3) + 1e-3, "b": a["b"]}, atol=1e-2)["identical_or_within_atol"]


def test_checksum_sees_a_single_bit_flip():
    t = torch.randn(1000)
    u = t.clone()
    u.view(torch.int32)[417] ^= 1
    a = sync.tensor_checksums([("t", t)])
    b = sync.tensor_checksums([("t", u)])
    assert not torch.equal(a, b)
    assert torch.equal(a, sync.tensor_checksums([("t", t.clone())]))
    for dt in (torch.bfloat16, torch.int64, torch.uint8):
        x = torch.ones(7).to(dt)
        assert sync.tensor_checksums([("x", x)]).shape == (1, 2)
