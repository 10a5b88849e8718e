"""The training loop: the trainer, one step, its timer, stops, evaluation, fault injection."""
