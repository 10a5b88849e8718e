"""A node that joins a later round of torchrun's c10d rendezvous finds the workers' store address there.

torch (2.4 and later) lets the rank-0 agent share its TCP store with the workers and publishes that store's
address (``MASTER_ADDR``/``MASTER_PORT`` under the round's prefix) only in the round where it first became rank
0; later rounds reuse the address cached in each agent. An agent that joins a later round for the first time (a
pod the PyTorchJob operator recreated after its process was killed, a node added to an elastic job) has nothing
cached and waits for the address under the new round's prefix, which nobody writes: after the store's 60 s
timeout it fails, the surviving agents fail with it, and every pod is recreated (each recreation counts
against the job's ``backoffLimit``). Here rank 0 writes the address it already uses into every round it
completes, so the new agent finds it at once.

The same shared store outlives the rounds, and so do the keys the workers of each round write into it (the
process group's addresses and ids under ``default_pg/``): torch gives the workers no namespace of their own per
round (``TORCHELASTIC_RESTART_COUNT`` is each agent's own count of its failures, so it differs between a
surviving agent and a recreated one). A worker of a new round can then read a dead worker's address of an earlier
round before its peer has written the new one (gloo: "Connection refused" to a port nobody holds any more; NCCL:
an old unique id), fail, and cost its agent one of its ``--max-restarts``; once an agent has none left it closes
the rendezvous, and every pod recreated after that fails with ``RendezvousClosedError`` (pytorch/pytorch#135712
describes the same). So every agent exports the round it has just joined (``ROUND_ENV``: the same number on
every node of the round) to the workers it starts, and ddp-train opens its process group in that round's own
namespace of the shared store (``distributed.round_store``).
"""

from __future__ import annotations

import os

# the rendezvous round this agent's workers belong to (set in the agent, read by ddp-train's process group init)
ROUND_ENV = "DDP_TRAIN_RDZV_ROUND"


def publish_store_address(info) -> None:
    """Write the workers' store address into this round's store, if this agent is rank 0 of the round."""
    from torch.distributed.elastic.rendezvous.api import RendezvousStoreInfo

    boot = info.bootstrap_store_info
    if info.rank != 0 or boot is None:
        return
    info.store.set(RendezvousStoreInfo.MASTER_ADDR_KEY, boot.master_addr.encode("utf-8"))
    info.store.set(RendezvousStoreInfo.MASTER_PORT_KEY, str(boot.master_port).encode("utf-8"))


def export_round(handler) -> None:
    """Put the round the handler has just joined into this process's environment, which the agent's workers
    inherit (torch starts them with a copy of it); nothing if this torch keeps the round elsewhere."""
    state = getattr(getattr(handler, "_state_holder", None), "state", None)
    number = getattr(state, "round", None)
    if isinstance(number, int):
        os.environ[ROUND_ENV] = str(number)
    else:
        os.environ.pop(ROUND_ENV, None)


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
        export_round(self)
        return info

    next_rendezvous.publishes_store_address = True
    DynamicRendezvousHandler.next_rendezvous = next_rendezvous
