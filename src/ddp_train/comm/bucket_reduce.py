"""``--graph-reducer bucketed``: graph mode's flat gradient buffer cut into buckets, each all-reduced as soon as
the backward has produced all of its gradients (``flatreduce`` holds the flat buffer and its docstring the
reasoning both reducers share)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ddp_train.comm.flat_reduce import FlatAllReduce


class BucketedAllReduce(FlatAllReduce):
    """The flat buffer in reverse parameter order (roughly the order in which the backward produces the
    gradients), cut into buckets of about ``bucket_bytes`` (DDP's rule: a bucket closes once it holds at least
    that many bytes; a larger parameter is a bucket of its own). A post-accumulate-grad hook on every parameter
    counts down its bucket; a bucket whose gradients are all accumulated is all-reduced at once (``async_op``),
    while the backward goes on, and ``all_reduce()`` (after the backward, before the optimizer) launches what is
    left and waits for all buckets.

    Buckets are launched strictly in bucket order (a ready bucket waits for the ones before it), so every rank
    issues the same collectives in the same order whatever order its hooks fire in. A parameter that gets no
    gradient in a step (unused in the forward, on one rank or on all) never fires its hook: its bucket is
    launched by ``all_reduce()`` after the backward, with that parameter's gradient left at zero — the same
    average as DDP with ``find_unused_parameters=True``. ``unready`` names such parameters after each step.

    Why the CUDA graph holds it (docs/ddp-train.md, "bucketed"): the hooks are Python and run only in eager
    steps and once during the capture; the capture records what they issue at that point of the backward on the
    capture stream — an event, the process group's NCCL stream waiting on it, the all-reduce kernel on that
    stream (the fork) — and ``Work.wait()`` makes the capture stream wait for the NCCL stream before the
    optimizer (the join). Replays run no Python: they repeat that fixed sequence, which is right because the
    step's autograd graph is the same every step (the same assumption the whole-step capture already makes).
    The Python state (countdowns, next bucket, pending works) is reset by ``zero_grad()`` at the start of every
    eager or captured step and read by nothing a replay needs. The buckets are fixed views of buffers allocated
    before the capture, so the graph's addresses stay valid; nothing in the hooks or the wait syncs with the host
    (NCCL's ``Work.wait()`` is a stream wait; ``TORCH_NCCL_BLOCKING_WAIT`` must stay unset).
    """

    def __init__(self, module: nn.Module, broadcast_buffers: bool = True, comm_dtype: torch.dtype = torch.float32,
                 bucket_bytes: int = 25 << 20, buffer_sync: str = "deferred"):
        if bucket_bytes <= 0:
            raise ValueError(f"bucket_bytes must be > 0, got {bucket_bytes}")
        super().__init__(module, broadcast_buffers=broadcast_buffers, comm_dtype=comm_dtype, buffer_sync=buffer_sync)
        self.names = {id(p): n for n, p in module.named_parameters()}
        # buckets: (start, end) element ranges of the flat buffer, and the parameters in each
        self.bounds, members = [], []
        start = off = 0
        cur = []
        for p in self.params:
            cur.append(p)
            off += p.numel()
            if off - start >= bucket_bytes // self.grad.element_size():
                self.bounds.append((start, off))
                members.append(cur)
                start, cur = off, []
        if cur:
            self.bounds.append((start, off))
            members.append(cur)
        self.bucket_params = members
        index = {id(p): i for i, p in enumerate(self.params)}
        self.bucket_views = [[self.views[index[id(p)]] for p in ps] for ps in members]
        # the same views of the bf16 buffer (None per bucket without it)
        self.bucket_comm_views = ([None] * len(members) if self.comm_views is None else
                                  [[self.comm_views[index[id(p)]] for p in ps] for ps in members])
        self.sizes = [len(m) for m in members]
        self.pending = list(self.sizes)
        self.ready = [False] * len(members)
        self.next = 0  # the next bucket to launch
        self.works = []
        self.launched = []  # bucket indices in launch order this step (tests, diagnosis)
        self.fired = set()  # ids of the parameters whose gradient this backward has accumulated
        self.unready = []  # parameters that got no gradient in the last step
        self.gloo = None
        self.handles = []
        for i, ps in enumerate(members):
            for p in ps:
                self.handles.append(p.register_post_accumulate_grad_hook(self._hook(i)))

    @staticmethod
    def layout(params):
        return list(reversed(params))

    def _hook(self, i):
        def on_grad(p):
            if id(p) in self.fired:
                raise RuntimeError(f"bucketed all-reduce: {self.names.get(id(p), '?')} got a second gradient before "
                                   "the step's all_reduce(); run one backward per zero_grad()")
            self.fired.add(id(p))
            self.pending[i] -= 1
            if self.pending[i] == 0:
                self.ready[i] = True
                self._launch_ready()
        return on_grad

    def _launch_ready(self, all_left: bool = False):
        while self.next < len(self.bounds) and (all_left or self.ready[self.next]):
            self._launch(self.next)
            self.next += 1

    def _launch(self, i):
        a, b = self.bounds[i]
        # with bf16 the gradients are cast straight into the bucket's slice of the bf16 buffer
        self.gather(self.bucket_params[i], self.bucket_views[i], self.bucket_comm_views[i])
        t = (self.grad if self.comm is None else self.comm)[a:b]
        if self.gloo is None:
            self.gloo = dist.get_backend() != "nccl"
        op = dist.ReduceOp.SUM if self.gloo else dist.ReduceOp.AVG  # gloo has no AVG: divided after the wait
        self.works.append(dist.all_reduce(t, op=op, async_op=True))
        self.launched.append(i)

    def zero_grad(self):
        super().zero_grad()
        self.pending = list(self.sizes)
        self.ready = [False] * len(self.sizes)
        self.next = 0
        self.works = []
        self.launched = []
        self.fired = set()

    def all_reduce(self):
        """Launch the buckets still waiting (gradients missing from this backward) and wait for all of them."""
        self.unready = [] if self.next == len(self.bounds) else \
            [self.names.get(id(p), "?") for p in self.params if id(p) not in self.fired]
        self._launch_ready(all_left=True)
        for w in self.works:
            w.wait()
        self.works = []
        t = self.grad if self.comm is None else self.comm
        if self.gloo:
            t.div_(dist.get_world_size())
        if self.comm is not None:
            self.grad.copy_(self.comm)

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
