"""The Hugging Face transformers Trainer with a plain torch model (forward returns the loss), as its docs write
it: TrainingArguments + Trainer(...).train(); under torchrun it takes the ranks from the environment."""

import torch
import transformers
from torch import nn
from transformers import Trainer, TrainingArguments


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(128, 8, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": int(self.x[i, 0] > 0)}


if __name__ == "__main__":
    args = TrainingArguments(output_dir="/tmp/trainer-out", per_device_train_batch_size=8, num_train_epochs=2,
                             learning_rate=0.1, report_to="none", save_strategy="no", logging_steps=4,
                             disable_tqdm=True, use_cpu=True)
    trainer = Trainer(model=Model(), args=args, train_dataset=Data())
    result = trainer.train()
    print(f"transformers {transformers.__version__} rank {args.process_index}/{args.world_size} "
          f"steps {result.global_step} loss {result.training_loss:.4f}", flush=True)
