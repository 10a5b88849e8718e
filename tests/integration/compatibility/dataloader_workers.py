"""DDP whose DataLoader spawns its own worker processes (num_workers=2, persistent), no destroy_process_group."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Squares(Dataset):
    def __len__(self):
        return 128

    def __getitem__(self, i):
        x = torch.full((8,), float(i % 7))
        return x, int(i % 2)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data = Squares()
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=8, sampler=sampler, num_workers=2, persistent_workers=True)
    model = DDP(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"dataloader-workers rank {rank}/{world} workers 2 loss {loss.item():.4f}", flush=True)
