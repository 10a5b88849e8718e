"""The training loop: the trainer, one step, its timer, the learning-rate schedule, stops, evaluation, fault injection."""
