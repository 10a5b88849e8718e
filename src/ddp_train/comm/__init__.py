"""How gradients and checks cross ranks: compression, graph mode's reducers, the sync check, NCCL's socket settings."""
