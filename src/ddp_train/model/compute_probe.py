"""The step's compute time at start-up, for the communication plan's prediction (ddp_train.comm.compression).

:func:`measure` builds a throwaway copy of the run's model (same architecture, device, memory format and
autocast dtype), runs forward, loss and backward on a synthetic batch of the run's per-rank shape (one untimed
pass, then :data:`ITERS` timed) and returns the mean seconds of one pass and the parameter count. Nothing of the run is touched: the
copy is not the run's model (its BatchNorm statistics and gradients are its own), and the random number
generators are restored afterwards, so a run with the probe trains bit for bit as one without it. It is eager:
for a small model whose step runs in one CUDA graph the figure includes kernel launches the graph does not pay,
so the prediction it feeds errs towards a faster step. The first pass also warms cuDNN's algorithm choice for
the run's shapes, which the run reuses.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from ddp_train.model.networks import build_model

ITERS = 3


def measure(*, model: str, shape: tuple[int, ...], num_classes: int, batch: int, device: torch.device,
            amp_dtype: torch.dtype | None, channels_last: bool) -> tuple[float, int]:
    """Mean seconds of one forward + loss + backward on ``batch`` samples of ``shape`` (see the module's text),
    and the model's parameter count (the gradients' elements)."""
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" \
        else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(0)
        net = build_model(model, shape, num_classes).to(device)
        params = sum(t.numel() for t in net.parameters() if t.requires_grad)
        x = torch.randn(batch, *shape, device=device)
        if channels_last and x.dim() == 4:
            net = net.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, num_classes, (batch,), device=device)
        loss_fn = nn.CrossEntropyLoss()
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

        def one_pass():
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = loss_fn(net(x), y)
            loss.backward()
            net.zero_grad(set_to_none=True)

        net.train()
        one_pass()
        sync()
        start = time.perf_counter()
        for _ in range(ITERS):
            one_pass()
        sync()
        took = (time.perf_counter() - start) / ITERS
    return took, params  # the copy, its batch and its activations are freed with this frame
