"""A torchrun-style script: LOCAL_RANK, RANK and WORLD_SIZE from the environment, init_method="env://",
device_ids from LOCAL_RANK when there are GPUs, DistributedSampler, and no destroy_process_group."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

local_rank = int(os.environ["LOCAL_RANK"])
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
cuda = torch.cuda.is_available()
if cuda:
    torch.cuda.set_device(local_rank)
dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world)
device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
model = nn.Linear(8, 2).to(device)
model = DDP(model, device_ids=[local_rank] if cuda else None)
g = torch.Generator().manual_seed(0)
x = torch.randn(128, 8, generator=g)
data = TensorDataset(x, (x[:, 0] > 0).long())
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=8, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
print(f"local-rank rank {rank}/{world} local {local_rank} batches {len(loader)} loss {loss.item():.4f}", flush=True)
