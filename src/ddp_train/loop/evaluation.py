"""Evaluation on the test split and the ranks' sync check, and the buffer broadcast both need first when graph
mode's reducers defer it (flatreduce's docstring: why the deferred broadcast reads the same values)."""

from __future__ import annotations

import contextlib
import sys

import torch
import torch.distributed as dist
from torch import nn

from ddp_train.comm import sync as sync_mod
from ddp_train.config.run_config import RunConfig
from ddp_train.model import compile_scope


class Checks:
    def __init__(self, config: RunConfig, rt, parts, runner, metrics, *, eval_pipeline, test_split):
        self.config, self.rt, self.p, self.runner, self.metrics = config, rt, parts, runner, metrics
        self.ev, self.test_split = eval_pipeline, test_split
        self.buffers_as_of = None  # the step after which every rank's buffers are a per-step broadcast's

    def sync_buffers_before_step(self, pos, stop_at, epoch_steps):
        """Graph mode's reducers (deferred buffer broadcast): before the forward of a step after which the ranks'
        buffers may be read (evaluation at an epoch's end or the run's, a sync check), every rank takes rank 0's,
        eagerly, outside the CUDA graph. The step then ends, on every rank, with exactly the buffers of a broadcast
        before every forward. Every rank decides alike (from the step counters)."""
        r = self.p.reducer
        if r is None or not r.deferred:
            return
        n, every = pos.global_step + 1, self.config.sync_check_every
        if n >= stop_at or pos.step_in_epoch + 1 >= epoch_steps or (every and n % every == 0):
            r.sync_buffers()
            self.buffers_as_of = n

    def _buffers_for_reading(self, step):
        """Before a read of the ranks' buffers (evaluation, sync check): they are a per-step broadcast's as of
        this step. A read sync_buffers_before_step did not foresee gets rank 0's buffers broadcast now (the same
        on every rank, but on ranks other than 0 not what a per-step broadcast would have left there)."""
        r = self.p.reducer
        if r is not None and r.deferred and self.buffers_as_of != step:
            r.sync_buffers()
            self.buffers_as_of = step

    @torch.no_grad()
    def evaluate(self, step):
        """(accuracy, loss) over the test split, each rank its disjoint share."""
        self._buffers_for_reading(step)
        rt, core, ev = self.rt, self.p.core, self.ev
        core.eval()
        correct = torch.zeros((), dtype=torch.float64, device=rt.device)
        loss_sum = torch.zeros((), dtype=torch.float64, device=rt.device)
        count = torch.zeros((), dtype=torch.float64, device=rt.device)
        idx = torch.arange(rt.rank, self.test_split.length, rt.world, device=rt.device) % self.test_split.pool
        bs = max(256, self.config.batch_size)
        for s in range(0, idx.numel(), bs):
            b = idx[s:s + bs]
            x, y = ev.normalize(ev.images[b]), ev.labels[b]
            with self.runner.autocast(), \
                    (compile_scope.eval_eager() if self.p.compile_units else contextlib.nullcontext()):
                out = core(x)
            loss_sum += nn.functional.cross_entropy(out.float(), y, reduction="sum").double()
            correct += (out.argmax(1) == y).sum().double()
            count += y.numel()
        stats = torch.stack([correct, loss_sum, count])
        if rt.multi:
            if rt.backend == "gloo":
                stats = stats.cpu()
            dist.all_reduce(stats)
        c, ls, n = stats.tolist()
        core.train()
        return (c / n if n else float("nan")), (ls / n if n else float("nan"))

    def sync_check(self, step):
        """Every rank's parameters and buffers compared bit for bit; the result (rank 0 says it)."""
        self._buffers_for_reading(step)
        res = sync_mod.check(self.p.core, self.config.sync_bn)
        if self.rt.is0:
            say = self.rt.say
            if res["bn_stats_drift"]:
                say(f"ddp-train: sync check: {len(res['bn_stats_drift'])} BatchNorm running-stat tensors differ "
                    "across ranks (expected without --sync-bn)")
            verdict = "PASS" if res["result"] == "pass" else "FAIL"
            say(f"ddp-train: sync check {verdict} at step {step}: {res['tensors']} tensors on "
                f"{self.rt.world} ranks" + (f"; mismatched: {', '.join(res['mismatched'])}" if res["mismatched"] else ""))
            if res["mismatched"]:
                print(f"ddp-train: error: sync check failed: {len(res['mismatched'])} tensor(s) differ across ranks: "
                      f"{', '.join(res['mismatched'][:10])}", file=sys.stderr, flush=True)
            self.metrics.write("sync_check", step=step, **res)
        return res
