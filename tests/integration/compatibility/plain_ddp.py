"""Plain torch.distributed + DDP, as PyTorch's DDP tutorial writes it: init from torchrun's env, train, then
destroy_process_group."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):
    x = torch.randn(16, 8)
    loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"plain-ddp rank {rank}/{world} steps 8 loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
