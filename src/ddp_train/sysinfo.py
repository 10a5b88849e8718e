"""``python -m ddp_train.sysinfo``: the public path of the system information line (``ddpctl bench`` and
``ddpctl doctor`` run it); its code lives in ``ddp_train.tools.sysinfo``."""

import sys

from ddp_train.tools.sysinfo import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
