"""One training step on the device, in the run's step mode: eager (op by op), or graph mode's eager
pre-capture iterations on a side stream, one capture into a CUDA graph, then replays of it (step_plan.py: why and when)."""

from __future__ import annotations

import contextlib
import time

import torch


class StepRunner:
    def __init__(self, rt, parts, *, graph_mode: bool, pre_capture_iters: int, acc):
        self.rt, self.p = rt, parts
        self.graph_mode = graph_mode
        self.pre_capture_left = pre_capture_iters if graph_mode else 0  # graph mode's eager iterations before the capture
        self.acc = acc  # this epoch's training loss sum and correct count, on the device
        self.graph = None  # the captured step (graph mode, once captured)
        self.capture_s = self.pre_capture_s = self.startup_s = None
        self._unready_said = False
        self._pre_capture_t0 = None

    def start(self):
        """The clock of graph mode's pre-capture iterations starts with the loop."""
        self._pre_capture_t0 = time.perf_counter()

    def autocast(self):
        if self.p.amp_dtype is None:
            return contextlib.nullcontext()
        # no cast cache in graph mode (PyTorch's CUDA-graph notes: cached casts would be captured as stale tensors)
        return torch.autocast(self.rt.device.type, dtype=self.p.amp_dtype, cache_enabled=not self.graph_mode)

    def _body(self, x, y):
        """Everything one training step does on the device: forward, loss, backward (DDP all-reduces the gradients
        in its hooks), optimizer step, and the epoch's loss/accuracy sums. In graph mode the captured graph holds
        exactly this, so no host-side work (logging, .item()) is in it."""
        p = self.p
        r, opt = p.reducer, p.optimizer
        if r is None:
            opt.zero_grad(set_to_none=True)  # Python only: backward then writes (not adds) the gradients
        else:
            r.zero_grad()  # as above; all_reduce() moves the gradients into its flat buffer
            r.pre_forward()
        with self.autocast():
            out = p.model(x)
            loss = p.criterion(out, y)
        if p.scaler:
            p.scaler.scale(loss).backward()
            if r is not None:
                r.all_reduce()
            p.scaler.step(opt)
            p.scaler.update()
        else:
            loss.backward()
            if r is not None:
                r.all_reduce()
            opt.step()
        with torch.no_grad():
            self.acc.add_(torch.stack([loss.detach().float() * y.shape[0], (out.detach().argmax(1) == y).sum().float()]))

    def _pre_capture_step(self, x, y):
        """An ordinary training step, run eagerly on the side stream before the capture (graph mode)."""
        dev = self.rt.device
        cur = torch.cuda.current_stream(dev)
        self.p.side_stream.wait_stream(cur)
        with torch.cuda.stream(self.p.side_stream):
            self._body(x, y)
        cur.wait_stream(self.p.side_stream)

    def _capture(self, x, y):
        """Capture one step into a CUDA graph, reading its batch from static buffers and its learning rate from
        device tensors (the schedule's value is copied in before each replay). Capturing runs nothing: the
        caller replays the graph for this step."""
        t0 = time.perf_counter()
        self.rt.sync_device()
        self.static_x, self.static_y = x.clone(), y.clone()
        groups = self.p.optimizer.param_groups
        self.lr_tensors = [torch.tensor(float(g["lr"]), dtype=torch.float32, device=self.rt.device) for g in groups]
        self.lr_loaded = [float(g["lr"]) for g in groups]
        floats = [g["lr"] for g in groups]
        graph = torch.cuda.CUDAGraph()
        try:
            for g, t in zip(groups, self.lr_tensors, strict=True):
                g["lr"] = t
            # thread_local: calls other threads make meanwhile (the NCCL watchdog querying the events of earlier
            # eager collectives, the NVML sampler) cannot invalidate the capture; the watchdog does not track
            # captured collectives.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._body(self.static_x, self.static_y)
        finally:
            for g, v in zip(groups, floats, strict=True):
                g["lr"] = v
        self.graph = graph
        self.capture_s = time.perf_counter() - t0

    def _replay(self, x, y):
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        for i, (g, t) in enumerate(zip(self.p.optimizer.param_groups, self.lr_tensors, strict=True)):
            v = float(g["lr"])
            if v != self.lr_loaded[i]:  # a one-element fill, only when the schedule moved
                t.fill_(v)
                self.lr_loaded[i] = v
        self.graph.replay()

    def _check_unready(self, global_step):
        """Once: say which parameters got no gradient (the bucketed reducer all-reduces their zeros after the
        backward, as DDP with find_unused_parameters=True; their bucket cannot overlap the backward)."""
        names = getattr(self.p.reducer, "unready", None)
        if names and not self._unready_said:
            self._unready_said = True
            self.rt.warn(f"{len(names)} parameter(s) got no gradient in step {global_step + 1} "
                         f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}): they are averaged as zeros "
                         "after the backward, and their bucket does not overlap it")

    def step(self, x, y, global_step):
        """One training step in this run's mode (``global_step``: the steps before it)."""
        if not self.graph_mode:
            self._body(x, y)
            self._check_unready(global_step)
        elif self.graph is not None:
            self._replay(x, y)
        elif self.pre_capture_left > 0:
            self._pre_capture_step(x, y)
            self._check_unready(global_step)
            if self.pre_capture_left == 1:
                self.rt.sync_device()
                self.pre_capture_s = time.perf_counter() - self._pre_capture_t0
            self.pre_capture_left -= 1
        else:
            self._capture(x, y)
            self._replay(x, y)
            self.startup_s = self.rt.elapsed()
