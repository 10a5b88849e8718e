"""ddp-train: the shared DDP training entrypoint and standard multi-GPU test program.

Imports torch, never ddpctl. It meets ddpctl only through torchrun's env (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) and its own argv.
"""

__version__ = "0.1.0"
