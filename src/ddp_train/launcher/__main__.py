"""``python -m ddp_train.launcher``: the same as ``ddp-train-launch``."""

import sys

from ddp_train.launcher.run import main

sys.exit(main())
