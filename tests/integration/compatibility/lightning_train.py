"""PyTorch Lightning as its docs write a multi-node script: Trainer(num_nodes=..., strategy="ddp"); under torchrun
Lightning takes the ranks from the environment. No destroy_process_group."""

import os

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 8, generator=g)
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    nodes = int(os.environ["WORLD_SIZE"]) // int(os.environ["LOCAL_WORLD_SIZE"])
    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ["LOCAL_WORLD_SIZE"]), num_nodes=nodes,
                        strategy="ddp", max_epochs=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(), data)
    print(f"lightning {L.__version__} rank {trainer.global_rank}/{trainer.world_size} steps {trainer.global_step}",
          flush=True)
