"""The model on the device: the networks, the wrapper (DDP, DataParallel, graph mode's reducer), the compile scope, the learning-rate schedule."""
