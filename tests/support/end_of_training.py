"""How training scripts end, as the launcher's exit tests and the third-party compatibility matrix run them.

- ``SCRIPT``: a DDP script that trains three steps, then ends as its first argument says (``exit3``: rank 1 exits
  3; ``hang``: rank 1 leaves a non-daemon thread running; anything else: a normal end);
- the matrix (tests/integration/compatibility/, docs/compatibility.md): which script each entry runs, what every
  rank prints at its end, what the user sets for it. Its ``up``, compose and PyTorchJob tests
  (tests/integration/test_third_party_scripts.py) and its Slurm test (tests/slurm/test_third_party_slurm.py) run
  the same entries.
"""

from __future__ import annotations

from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "integration" / "compatibility"

# entry -> (script, what each rank prints at its end; {rank} filled in)
ENTRIES = {
    "plain-ddp": ("plain_ddp.py", "plain-ddp rank {rank}/2 steps 8"),
    "plain-ddp-no-destroy": ("plain_ddp_no_destroy.py", "plain-ddp-no-destroy rank {rank}/2 steps 8"),
    "local-rank": ("local_rank.py", "local-rank rank {rank}/2 local 0 batches 8"),
    "lightning": ("lightning_train.py", "lightning 2.6.6 rank {rank}/2 steps 16"),
    "accelerate": ("accelerate_train.py", "accelerate 1.15.0 rank {rank}/2 batches 8"),  # batches: 128 / 8 / 2
    "transformers": ("transformers_trainer.py", "transformers 5.17.0 rank {rank}/2 steps 16"),
    "dataloader-workers": ("dataloader_workers.py", "dataloader-workers rank {rank}/2 workers 2"),
}

# what the user sets for an entry (docs/compatibility.md): on nodes without GPUs, Accelerate runs distributed only
# when asked to use the CPU (ACCELERATE_USE_CPU, what `accelerate launch --cpu` sets); else every process trains
# alone
ENV = {"accelerate": ["-e", "ACCELERATE_USE_CPU=true"]}


def assert_printed(out: str, entry: str) -> None:
    """Every rank of the 2-node job printed the entry's last line."""
    for rank in (0, 1):
        line = ENTRIES[entry][1].format(rank=rank)
        assert line in out, f"{entry}: no '{line}' in\n{out[-3000:]}"


SCRIPT = '''
import sys, threading, time, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(nn.Linear(4, 1))
for _ in range(3):
    model(torch.randn(8, 4)).sum().backward()
print(f"trained rank {rank}", flush=True)
how = sys.argv[1]
if rank == 1 and how == "exit3":
    sys.exit(3)
if rank == 1 and how == "hang":
    threading.Thread(target=time.sleep, args=(3600,), name="never-ends").start()
'''
