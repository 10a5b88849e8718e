"""``ddp-train-launch``: torchrun with whole, rank-prefixed output lines and one root-cause line."""
