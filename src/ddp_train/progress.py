"""``ddp_train.progress``: the public path of the progress-record API (``report``, ``record``) that any training
script may call; its code lives in ``ddp_train.observe.progress``."""

from ddp_train.observe.progress import record, report

__all__ = ["record", "report"]
