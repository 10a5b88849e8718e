"""Programs beside the trainer: the all-reduce probe and the system information line."""
