"""``ddp_train.lightning_progress``: the public path of the Lightning callback that writes progress records; its
code lives in ``ddp_train.observe.lightning``."""

from ddp_train.observe.lightning import ProgressCallback

__all__ = ["ProgressCallback"]
