"""A node that joins a later round of torchrun's c10d rendezvous finds the workers' store address there.

torch (2.4 and later) lets the rank-0 agent share its TCP store with the workers and publishes that store's
address (``MASTER_ADDR``/``MASTER_PORT`` under the round's prefix) only in the round where it first became rank
0; later rounds reuse the address cached in each agent. An agent that joins a later round for the first time (a
pod the PyTorchJob operator recreated after its process was killed, a node added to an elastic job) has nothing
cached and waits for the address under the new round's prefix, which nobody writes: after the store's 60 s
timeout it fails, the surviving agents fail with it, and every pod is recreated (each recreation counts
against the job's ``backoffLimit``). Here rank 0 writes the address it already uses into every round it
completes, so the new agent finds it at once.
"""

from __future__ import annotations


def publish_store_address(info) -> None:
    """Write the workers' store address into this round's store, if this agent is rank 0 of the round."""
    from torch.distributed.elastic.rendezvous.api import RendezvousStoreInfo

    boot = info.bootstrap_store_info
    if info.rank != 0 or boot is None:
        return
    info.store.set(RendezvousStoreInfo.MASTER_ADDR_KEY, boot.master_addr.encode("utf-8"))
    info.store.set(RendezvousStoreInfo.MASTER_PORT_KEY, str(boot.master_port).encode("utf-8"))


def apply() -> None:
    """Wrap torch's dynamic rendezvous handler once per process (the launcher calls this before torchrun)."""
    try:
        from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
    except ImportError:  # no torch.distributed.elastic: nothing to fix
        return
    original = DynamicRendezvousHandler.next_rendezvous
    if getattr(original, "publishes_store_address", False):
        return

    def next_rendezvous(self):
        info = original(self)
        publish_store_address(info)
        return info

    next_rendezvous.publishes_store_address = True
    DynamicRendezvousHandler.next_rendezvous = next_rendezvous
