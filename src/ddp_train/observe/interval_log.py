"""The interval log lines (and metrics records) of the training loop, written without stalling the step."""

from __future__ import annotations

import time

import torch


class IntervalLog:
    """Figures for the log lines without stalling the step. On a GPU a log point copies the loss sum to pinned
    host memory (non-blocking) and records a CUDA event; its line is written once that event has completed (at
    a later log point, or at the end of the epoch), with the interval's time measured between events on the
    GPU. So no log point waits for the device. On CPU: the host clock, written at once."""

    def __init__(self, device, write=None):
        self.cuda = device.type == "cuda"
        self.write = write  # what write_ready() hands each ready interval's record to (emit, with its context)
        self.pending = []
        self.prev = None

    def _now(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self):
        self.pending.clear()
        self.prev = self._now()
        self.steps, self.data = 0, 0.0  # the interval's steps and data-wait seconds so far

    def stepped(self, data_s):
        self.steps += 1
        self.data += data_s

    def mark(self, acc, rec):
        """A log point: the interval ends here with ``rec`` (plus its steps and data time)."""
        rec = dict(rec, steps=self.steps, data=self.data)
        self.steps, self.data = 0, 0.0
        if self.cuda:
            host = torch.empty(acc.shape, dtype=acc.dtype, pin_memory=True)
            host.copy_(acc, non_blocking=True)
        else:
            host = acc.detach().clone()
        now = self._now()
        self.pending.append((self.prev, now, host, rec))
        self.prev = now

    def ready(self, wait=False):
        out = []
        while self.pending:
            a, b, host, rec = self.pending[0]
            if self.cuda:
                if not wait and not b.query():
                    break
                b.synchronize()
                seconds = a.elapsed_time(b) / 1000.0
            else:
                seconds = b - a
            self.pending.pop(0)
            out.append(dict(rec, seconds=seconds, loss_sum=float(host[0])))
        return out

    def write_ready(self, wait=False):
        for rec in self.ready(wait):
            self.write(rec)


def emit(rec, *, rt, metrics, gpu, global_batch, epochs, epoch_steps, records=None):
    """A log line (or the progress bar's update) and a metrics record for one ready interval."""
    st = rec["seconds"] / max(1, rec["steps"])
    ips = global_batch / st if st > 0 else 0.0
    lval = rec["loss_sum"] / max(1, rec["seen"])
    info = dict(epoch=rec["epoch"], step=rec["step"], loss=round(lval, 4), lr=rec["lr"],
                step_time_s=round(st, 5), data_time_s=round(rec["data"] / max(1, rec["steps"]), 5),
                images_per_sec=round(ips, 1), gpu_util=gpu.mean_util())
    if rec["bar"] is not None:
        rec["bar"].update(rec["step_in_epoch"], f"loss {lval:.3f} {ips:,.0f} img/s", force=rec["last"])
    if rec["log"]:
        if rec["bar"] is None:
            rt.say(f"epoch {rec['epoch'] + 1}/{epochs} step {rec['step_in_epoch']}/{epoch_steps} "
                   f"(global {rec['step']}) loss {lval:.4f} step {st * 1000:.1f} ms "
                   f"data {info['data_time_s'] * 1000:.1f} ms {ips:,.0f} img/s")
        metrics.write("step", **info)
        if records is not None:
            records.emit(info)  # the progress record (and --tensorboard scalars) of this interval


def epoch_line(o, epoch, ep_time, *, rt, metrics, gpu, epochs, step, records=None):
    """An epoch's metrics record and line, from the run's outcome so far (``summary.Outcome``); ``step``: the
    global step the epoch ended at."""
    metrics.write("epoch", epoch=epoch, epoch_time_s=round(ep_time, 3), train_loss=o.train_loss,
                  train_acc=o.train_acc, test_acc=o.test_acc, test_loss=o.test_loss,
                  gpu_util=gpu.mean_util(), gpu_mem_gb=gpu.mem_gb())
    if records is not None:
        records.epoch_done(step, o.test_acc)
    rt.say(f"epoch {epoch + 1}/{epochs} done in {ep_time:.2f}s: train loss {o.train_loss:.4f} "
           f"acc {o.train_acc:.4f}" + (f", test acc {o.test_acc:.4f}" if o.test_acc is not None else ""))
