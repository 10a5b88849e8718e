"""Hugging Face Accelerate as its quick tour writes it: Accelerator(), prepare(), accelerator.backward(); no
end_training() and no destroy_process_group."""

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()
g = torch.Generator().manual_seed(0)
x = torch.randn(128, 8, generator=g)
loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8, shuffle=True)
model = nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for _epoch in range(2):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        accelerator.backward(loss)
        optimizer.step()
import accelerate  # noqa: E402

print(f"accelerate {accelerate.__version__} rank {accelerator.process_index}/{accelerator.num_processes} "
      f"batches {len(loader)} loss {loss.item():.4f}", flush=True)
