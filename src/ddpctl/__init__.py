"""ddpctl: one job spec -> multi-GPU, multi-node PyTorch DDP runs.

The control plane never imports torch (and imports docker only where it talks to the engine), so
``ddpctl --help`` and ``ddpctl render`` start fast.
"""

__version__ = "0.1.0"
