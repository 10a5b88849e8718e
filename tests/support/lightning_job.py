"""A third-party style Lightning script: Trainer(strategy="ddp") on gloo, with ddp_train's ProgressCallback."""

import os
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ddp_train.lightning_progress import ProgressCallback


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16 * steps, 8, generator=g)
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
                        num_nodes=int(os.environ.get("WORLD_SIZE", "1")) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
                        strategy=L.pytorch.strategies.DDPStrategy(process_group_backend="gloo"), max_epochs=2,
                        log_every_n_steps=2, enable_progress_bar=False, enable_model_summary=False, logger=False,
                        default_root_dir=os.environ.get("DDPCTL_CHECKPOINTS", "."), callbacks=[ProgressCallback()])
    trainer.fit(Tiny(), data)
    if torch.distributed.is_initialized():  # before exit, as torch asks (gloo's threads may abort the exit else)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
