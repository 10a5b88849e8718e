"""Data parallelism for the captured training step without DDP's reducer: the gradients of all parameters live
in one flat fp32 buffer that NCCL averages inside the CUDA graph, either in one all-reduce after the backward
(``FlatAllReduce``, ``--graph-reducer flat``) or in a few buckets, each launched as soon as the backward has
produced all of its gradients, overlapping the rest of the backward (``bucketreduce.BucketedAllReduce``,
``--graph-reducer bucketed``).

What DDP does, done with plain collectives that a CUDA graph holds as they are:

- at construction, rank 0's parameters and buffers are broadcast, so every rank starts from the same state;
- each parameter's ``.grad`` is set to None at the start of a step, so autograd's AccumulateGrad keeps the
  gradient the backward produced as it is (no kernel), exactly as a single-GPU step with
  ``zero_grad(set_to_none=True)`` does; before the all-reduce one multi-tensor copy moves them into ``self.grad``
  (into the bf16 buffer ``self.comm`` with bf16, see below) and each ``.grad`` becomes a view into ``self.grad``
  with the parameter's own strides (channels_last weights too), so the optimizer reads the averaged gradients in
  place. (Accumulating into the zeroed buffer instead costs a 45 MB
  memset and one read-modify-write kernel per parameter: ~0.2 ms per ResNet-18 step on an H100, measured with
  the collectives switched off, 2x H100, docs/benchmarks/2026-11-26-benchmarks.md);
- with ``broadcast_buffers`` (DDP's default), the floating-point buffers (BatchNorm running statistics) are
  views into one flat buffer that rank 0 broadcasts, so every rank reads rank 0's statistics as under DDP. DDP
  broadcasts before every forward; these reducers by default (``buffer_sync="deferred"``) only before the
  forward of a step whose buffers something reads afterwards: ``sync_buffers()``, called eagerly by the training
  loop, outside the CUDA graph, so the captured step holds one collective less (``buffer_sync="step"``: in every
  step's ``pre_forward()``, DDP's way, kept for comparison).

Why the deferred broadcast gives every reader the very values of DDP's per-step one (docs/ddp-train.md, "Buffer
broadcast"): a training-mode forward never reads the running statistics, it only updates them from the batch
(``x = (1 - momentum) * x + momentum * batch_stat``, or the cumulative average with ``momentum=None``). So
parameters, gradients and losses never depend on them, and rank 0's own statistics evolve alike either way (it
only ever receives its own). On another rank, under a per-step broadcast, the statistics after step ``k`` are
rank 0's from before step ``k`` updated with that rank's own batch ``k`` (not rank 0's after step ``k``): whatever
the rank held before the broadcast is overwritten. So a broadcast before the forward of step ``k`` alone gives
every rank after step ``k`` exactly what a broadcast before every step gives, bit for bit; the steps in between
need none as long as nothing reads the other ranks' statistics after them. The readers on ranks other than 0 are
the evaluation (each rank evaluates its share of the test set with its own statistics) and the sync check (it
compares all ranks' buffers); checkpoints hold rank 0's state only. The integer ``num_batches_tracked`` is not
in the flat buffer (never broadcast here): every rank runs the same number of forwards, so it is the same
everywhere.

One all-reduce of all gradients after the backward (no overlap with it): for ResNet-18's 44.7 MB that is
~0.2 ms on NVLink, against a 4-5 ms step. With ``comm_dtype=torch.bfloat16`` (``--grad-compression bf16``) the
backward's gradients are copied straight into a bf16 buffer (the multi-tensor copy casts as it moves them),
all-reduced (half the bytes on the wire) and cast back into the fp32 buffer, as DDP's ``bf16_compress_hook``
rounds them; the parameters, the optimizer and the fp32 buffer are unchanged. Gathering into the fp32 buffer
first and casting it after would move the gradients through memory once more (~30 us for ResNet-18 on an
H200, a point of a 4-GPU step's scaling).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def _broadcast_from_rank0(tensors):
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = _flatten_dense_tensors([t.detach() for t in group])
        dist.broadcast(flat, 0)
        for t, src in zip(group, _unflatten_dense_tensors(flat, group), strict=True):
            with torch.no_grad():
                t.copy_(src)


def _dense(t: torch.Tensor) -> bool:
    """Strides of a dense, non-overlapping layout (any dimension order: contiguous, channels_last, ...)."""
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: (t.stride(d), t.size(d))):
        if t.size(d) != 1 and t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def _view_like(flat: torch.Tensor, t: torch.Tensor, offset: int) -> torch.Tensor:
    """A view of ``flat[offset:offset + t.numel()]`` with ``t``'s shape and strides (dense layouts only)."""
    if _dense(t):
        return torch.as_strided(flat, t.shape, t.stride(), offset)
    return flat[offset:offset + t.numel()].view(t.shape)


class FlatAllReduce:
    def __init__(self, module: nn.Module, broadcast_buffers: bool = True, comm_dtype: torch.dtype = torch.float32,
                 skip_sync: bool = False, buffer_sync: str = "deferred"):
        if buffer_sync not in ("deferred", "step"):
            raise ValueError(f"buffer_sync must be 'deferred' or 'step', got {buffer_sync!r}")
        # "step": rank 0's buffers broadcast in every step's pre_forward(), DDP's way; "deferred": only when the
        # training loop calls sync_buffers() (before the forward of a step whose buffers are read afterwards)
        self.buffer_sync = buffer_sync
        self.params = self.layout([p for p in module.parameters() if p.requires_grad])
        _broadcast_from_rank0(list(module.parameters()) + list(module.buffers()))
        dev = self.params[0].device
        dtypes = {p.dtype for p in self.params}
        if dtypes != {torch.float32}:
            raise ValueError(f"flat all-reduce expects fp32 parameters, got {sorted(map(str, dtypes))}")
        self.grad = torch.zeros(sum(p.numel() for p in self.params), dtype=torch.float32, device=dev)
        # the bf16 copy that travels (None: the fp32 buffer itself is all-reduced)
        self.comm = None if comm_dtype == torch.float32 else torch.empty_like(self.grad, dtype=comm_dtype)
        # diagnosis only (hidden --debug-skip-grad-sync): no collective at all, so ranks drift apart
        self.skip_sync = skip_sync
        off = 0
        self.views = []  # each parameter's slice of self.grad, with the parameter's shape and strides
        # the same slices of self.comm (None without it): where the backward's gradients go with bf16
        self.comm_views = None if self.comm is None else []
        for p in self.params:
            self.views.append(_view_like(self.grad, p, off))
            if self.comm_views is not None:
                self.comm_views.append(_view_like(self.comm, p, off))
            p.grad = self.views[-1]
            off += p.numel()
        self.buffers = None
        if broadcast_buffers:
            owned = [(m, name, b) for m in module.modules() for name, b in m._buffers.items()
                     if b is not None and b.is_floating_point()]
            if owned:
                dtype = owned[0][2].dtype
                owned = [o for o in owned if o[2].dtype == dtype]
                self.buffers = torch.empty(sum(b.numel() for _, _, b in owned), dtype=dtype, device=dev)
                off = 0
                for m, name, b in owned:
                    view = _view_like(self.buffers, b, off)
                    view.copy_(b)
                    m._buffers[name] = view
                    off += b.numel()

    @staticmethod
    def layout(params):
        """The order of the parameters in the flat buffer."""
        return params

    def zero_grad(self):
        """Before the forward: no gradients, so the backward's own tensors become ``.grad`` (no copy, no add)."""
        for p in self.params:
            p.grad = None

    def gather(self, params, views, comm_views=None):
        """Move the backward's gradients of ``params`` into their ``views`` of the flat buffer, or, given their
        ``comm_views`` of the bf16 buffer, into those (one multi-tensor copy, casting as it goes; zeros for a
        parameter the backward did not reach); point each ``.grad`` at its fp32 view either way."""
        src, dst, zero = [], [], []
        targets = comm_views if comm_views is not None else views
        for p, view, target in zip(params, views, targets, strict=True):
            g = p.grad
            if g is None:
                zero.append(target)
            elif comm_views is not None or g.data_ptr() != view.data_ptr():  # the view already: nothing to move
                src.append(g)
                dst.append(target)
            p.grad = view
        if dst:
            torch._foreach_copy_(dst, src)
        if zero:
            torch._foreach_zero_(zero)

    @property
    def deferred(self) -> bool:
        """Buffers to broadcast, but not in the step: the caller owes ``sync_buffers()`` before a step whose
        buffers it reads afterwards."""
        return self.buffers is not None and self.buffer_sync == "deferred" and not self.skip_sync

    def pre_forward(self):
        """In the step, before the forward: rank 0's buffers broadcast (``buffer_sync="step"`` only)."""
        if self.buffers is not None and self.buffer_sync == "step" and not self.skip_sync:
            dist.broadcast(self.buffers, 0)

    def sync_buffers(self):
        """Collective, eager (never inside a CUDA graph): every rank takes rank 0's buffers now, in place (the
        captured step's views stay valid). Called before the forward of a step after which another rank's
        buffers are read, this step ends with the buffers a broadcast before every forward would give."""
        if self.buffers is not None and not self.skip_sync:
            dist.broadcast(self.buffers, 0)

    def all_reduce(self):
        if self.skip_sync:
            self.gather(self.params, self.views)
            return
        self.gather(self.params, self.views, self.comm_views)
        t = self.grad if self.comm is None else self.comm
        if dist.get_backend() == "nccl":
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
        else:  # gloo has no AVG
            dist.all_reduce(t)
            t.div_(dist.get_world_size())
        if self.comm is not None:
            self.grad.copy_(self.comm)
