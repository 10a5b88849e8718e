"""A DDP script that trains three steps, then ends as its first argument says (``exit3``: rank 1 exits 3;
``hang``: rank 1 leaves a non-daemon thread running; anything else: a normal end). The launcher's exit tests and
the third-party matrix run it."""

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
