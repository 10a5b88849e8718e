"""A Lightning callback that writes progress records (``ddp_train.observe.progress``) for ``ddpctl status``.

    import lightning as L
    from ddp_train.observe.lightning import ProgressCallback

    trainer = L.Trainer(strategy="ddp", callbacks=[ProgressCallback()])

Every rank writes one record per ``every_n_steps`` optimizer steps (default: the Trainer's
``log_every_n_steps``): the step and the run's total (``trainer.estimated_stepping_batches``), epoch, the
training loss of that batch, the learning rate of the first optimizer, samples/s over the interval (the
batch's length x world size), and the newest checkpoint of the Trainer's ModelCheckpoint. Reading the loss
waits for that batch's step to finish on the device, at the interval only, as Lightning's own logging does.
Works with ``lightning`` (``lightning.pytorch``) or ``pytorch_lightning``.
"""

from __future__ import annotations

import time

from ddp_train.observe import progress

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback


def _batch_len(batch) -> int | None:
    if isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    if isinstance(batch, dict) and batch:
        batch = next(iter(batch.values()))
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape else None


class ProgressCallback(Callback):
    def __init__(self, every_n_steps: int | None = None):
        super().__init__()
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}")
        self.every = every_n_steps
        self._mark = None  # (step, time) of the last record
        self._samples = 0

    def on_train_start(self, trainer, pl_module):
        self._mark = (trainer.global_step, time.monotonic())
        self._samples = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        n = _batch_len(batch)
        if n:
            self._samples += n * trainer.world_size
        step = trainer.global_step
        every = self.every or max(1, trainer.log_every_n_steps)
        last = step >= trainer.estimated_stepping_batches
        if step == 0 or (self._mark and step == self._mark[0]) or (step % every and not last):
            return  # not due (gradient accumulation: one record per optimizer step at most)
        self.report(trainer, outputs)

    def report(self, trainer, outputs=None) -> dict:
        """Write one record now (from the values on the host and the loss in ``outputs``)."""
        step, now = trainer.global_step, time.monotonic()
        last_step, last_t = self._mark or (step, now)
        dt = now - last_t
        rate = self._samples / dt if dt > 0 and self._samples else None
        step_time = dt / (step - last_step) if step > last_step else None
        self._mark, self._samples = (step, now), 0
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        loss = float(loss.detach().float()) if hasattr(loss, "detach") else (float(loss) if loss is not None else None)
        lr = None
        if trainer.optimizers:
            lr = trainer.optimizers[0].param_groups[0].get("lr")
        total = trainer.estimated_stepping_batches
        total = int(total) if total and total != float("inf") else None
        ckpt = trainer.checkpoint_callback
        path = (getattr(ckpt, "last_model_path", "") or getattr(ckpt, "best_model_path", "")) if ckpt else ""
        saved = self._saved_step if path else None
        return progress.report(step=step, total=total, loss=loss, lr=lr, samples_per_sec=rate,
                               step_time_s=step_time, epoch=trainer.current_epoch + 1,
                               epochs=trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None,
                               checkpoint_step=saved, checkpoint_path=path or None)

    _saved_step = None

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._saved_step = trainer.global_step
