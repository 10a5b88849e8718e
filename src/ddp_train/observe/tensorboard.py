"""``ddp-train --tensorboard DIR``: the log interval's scalars as TensorBoard event files (rank 0).

Through ``torch.utils.tensorboard``, which needs the ``tensorboard`` package (the ``tensorboard`` extra of
ddpctl; in the CUDA image). Each write is flushed, so a run that is killed leaves its curves up to its last
log interval. Scalars: ``train/loss``, ``train/lr``, ``train/samples_per_sec``, ``train/gpu_util`` (on a GPU
with pynvml), ``eval/test_acc`` (after each epoch's evaluation); the step axis is the global optimizer step.
"""

from __future__ import annotations

import os

from ddp_train.errors import EXIT_USAGE, TrainError

TAGS = {"loss": "train/loss", "lr": "train/lr", "samples_per_sec": "train/samples_per_sec",
        "gpu_util": "train/gpu_util", "test_acc": "eval/test_acc"}


class _Writer:
    def __init__(self, writer):
        self.w = writer

    def scalars(self, step, **values):
        for key, value in values.items():
            if value is not None:
                self.w.add_scalar(TAGS[key], float(value), step)
        self.w.flush()

    def close(self):
        self.w.close()


MISSING = ("--tensorboard needs the tensorboard package, which this environment lacks; install it (pip install "
           "'ddpctl[tensorboard]' or pip install tensorboard; every image ddpctl builds has it; in another image, "
           "name it in your workspace's requirements.txt) or drop --tensorboard")


def require() -> None:
    """Raise unless the tensorboard package imports. Every rank checks it while parsing its flags, before it
    joins the process group: rank 0 alone (the writer) would otherwise stop after the others joined, and they
    would report a lost peer (a retryable exit) instead of this one usage error."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise TrainError(MISSING, EXIT_USAGE) from None


def open_writer(directory: str) -> _Writer:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise TrainError(MISSING, EXIT_USAGE) from None
    try:
        os.makedirs(directory, exist_ok=True)
        return _Writer(SummaryWriter(log_dir=directory))
    except OSError as exc:
        raise TrainError(f"cannot write TensorBoard files to {directory} ({exc.strerror or exc}); pass a writable "
                         "--tensorboard DIR", EXIT_USAGE) from None
