"""``python -m ddp_train.allreduce_probe``: the public path of the all-reduce probe (``ddpctl bench`` starts it
under torchrun); its code lives in ``ddp_train.tools.allreduce_probe``."""

import sys

from ddp_train.tools.allreduce_probe import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
