"""ddp_train.runtime.round_store on a real c10d TCPStore."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler

from ddp_train.runtime import round_store


@pytest.fixture
def server():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5), wait_for_workers=False)
    yield store


def _client(server, prefix: str):
    c = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=2))
    return dist.PrefixStore(prefix, c)


def test_rank_0_of_a_later_round_publishes_the_address_a_new_agent_waits_for(server):
    boot = RendezvousStoreInfo(master_addr="job-worker-0", master_port=40123)
    round1 = _client(server, "torch.rendezvous.job.1")
    round_store.publish_store_address(RendezvousInfo(round1, 0, 2, boot))
    # the agent that joins round 1 for the first time: rank 1, nothing cached, torch's own read
    new = RendezvousStoreInfo.build(1, _client(server, "torch.rendezvous.job.1"), local_addr="job-worker-1")
    assert (new.master_addr, new.master_port) == ("job-worker-0", 40123)


def test_other_ranks_and_rounds_without_an_address_write_nothing(server):
    boot = RendezvousStoreInfo(master_addr="job-worker-0", master_port=40123)
    round2 = _client(server, "torch.rendezvous.job.2")
    round_store.publish_store_address(RendezvousInfo(round2, 1, 2, boot))
    round_store.publish_store_address(RendezvousInfo(round2, 0, 2, None))
    assert not round2.check([RendezvousStoreInfo.MASTER_ADDR_KEY])


def test_apply_wraps_the_handler_once(monkeypatch):
    monkeypatch.setattr(DynamicRendezvousHandler, "next_rendezvous", DynamicRendezvousHandler.next_rendezvous)
    round_store.apply()
    wrapped = DynamicRendezvousHandler.next_rendezvous
    assert wrapped.publishes_store_address
    round_store.apply()
    assert DynamicRendezvousHandler.next_rendezvous is wrapped
