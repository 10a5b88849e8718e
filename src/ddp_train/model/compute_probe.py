"""The step's compute time at start-up, for the communication plan's prediction (ddp_train.comm.compression).

:func:`measure` builds a throwaway copy of the run's model (same architecture, device, memory format and
autocast dtype), runs forward, loss and backward on a synthetic batch of the run's per-rank shape and returns
the mean seconds of one pass and the parameter count. With ``graph`` (a CUDA run whose step plan is graph
mode, ddp-train's default there) the pass is timed as graph mode runs it: a few eager passes on a side stream,
one capture into a CUDA graph, then :data:`TIMED_PASSES` timed replays, so a small model's figure is its
kernels' time, not the host's launches (ResNet-18 on an H200: 4.7 ms in the graph against 11-13 ms eager); where
capture fails the eager figure stands. Otherwise one untimed eager pass, then :data:`TIMED_PASSES` timed.

Nothing of the run's own state is touched: the copy is not the run's model (its BatchNorm statistics and
gradients are its own), the random number generators are restored afterwards, the current stream is the one
before, and on CUDA the memory the copy, its activations and its graph took goes back to the driver
(``empty_cache``). What carries over is cuDNN's algorithm choice for the run's shapes (``cudnn.benchmark``, on by
default on CUDA), which the run's own first steps would otherwise make.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from ddp_train.model.networks import build_model

TIMED_PASSES = 3
WARM_PASSES = 3  # eager passes on a side stream before the capture (as graph mode's pre-capture iterations)


def measure(*, model: str, shape: tuple[int, ...], num_classes: int, batch: int, device: torch.device,
            amp_dtype: torch.dtype | None, channels_last: bool, graph: bool = False) -> tuple[float, int]:
    """Mean seconds of one forward + loss + backward on ``batch`` samples of ``shape`` (see the module's text),
    and the model's parameter count (the gradients' elements)."""
    cuda = device.type == "cuda"
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if cuda else []
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(0)
            return _time_passes(model=model, shape=shape, num_classes=num_classes, batch=batch, device=device,
                                amp_dtype=amp_dtype, channels_last=channels_last, graph=graph and cuda)
    finally:
        if cuda:  # the copy, its batch, activations and graph pool: back to the driver, not kept in torch's cache
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()


def _time_passes(*, model, shape, num_classes, batch, device, amp_dtype, channels_last, graph) -> tuple[float, int]:
    net = build_model(model, shape, num_classes).to(device)
    params = sum(t.numel() for t in net.parameters() if t.requires_grad)
    x = torch.randn(batch, *shape, device=device)
    if channels_last and x.dim() == 4:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, num_classes, (batch,), device=device)
    criterion = nn.CrossEntropyLoss()

    def one_pass(cache: bool = True):
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None, cache_enabled=cache):
            loss = criterion(net(x), y)
        loss.backward()

    net.train()
    took = _graph_time(net, one_pass, device) if graph else None
    if took is None:
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
        one_pass()
        net.zero_grad(set_to_none=True)
        sync()
        start = time.perf_counter()
        for _ in range(TIMED_PASSES):
            one_pass()
            net.zero_grad(set_to_none=True)
        sync()
        took = (time.perf_counter() - start) / TIMED_PASSES
    return took, params


def _graph_time(net: nn.Module, one_pass, device: torch.device) -> float | None:
    """Mean seconds of a replay of ``one_pass`` captured in a CUDA graph; None where it cannot be captured. The
    capture is thread-local, as the run's own (step_runner.py): NCCL's watchdog and the GPU sampler may call CUDA
    from their threads meanwhile; the current stream is put back whatever happens (a failed capture's end raises
    before torch restores it)."""
    before = torch.cuda.current_stream(device)
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(before)
        with torch.cuda.stream(side):
            for _ in range(WARM_PASSES):
                net.zero_grad(set_to_none=True)
                one_pass(cache=False)
        before.wait_stream(side)
        net.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            one_pass(cache=False)  # no cast cache in a graph (stale casts would be captured)
        graph.replay()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(TIMED_PASSES):
            graph.replay()
        torch.cuda.synchronize(device)
        took = (time.perf_counter() - start) / TIMED_PASSES
        del graph
        return took
    except Exception:  # noqa: BLE001 - a model graph capture refuses: the eager figure instead
        torch.cuda.set_stream(before)  # before the synchronize and zero_grad below, as in the finally
        torch.cuda.synchronize(device)
        net.zero_grad(set_to_none=True)
        return None
    finally:
        torch.cuda.set_stream(before)
