"""Checkpoints: atomic storage, what a checkpoint holds of a run and putting it back, when to save."""
