"""How gradients cross the link: compression, graph-mode reducer and bucket size, chosen from the measured link.

``--grad-compression auto|none|bf16|powersgd``, ``--graph-reducer auto|flat|bucketed|ddp`` and ``--bucket-mb``
(default: auto) are decided here once, before the step mode is planned (``ddp_train.config.run_plan``) and the model is wrapped (:func:`decide`);
the first log line of the run prints :meth:`CommPlan.describe` (which, and why).

The ``auto`` rule. On a CUDA run of several ranks (NCCL) that leaves anything on auto, every rank times a
32 MiB fp32 all-reduce (one untimed, then :data:`PROBE_ITERS` timed; the slowest rank's time, so all ranks
decide alike): ``busbw = 2(n-1)/n x bytes / time``, as the all-reduce probe reports it. It costs a few
milliseconds on NVLink and ~0.1 s on a 2 GB/s socket link.

- **fast link** (busbw >= :data:`SLOW_LINK_GBPS`: NVLink, a PCIe switch, fast InfiniBand): graph mode's
  ``flat`` reducer (one all-reduce after the backward: ~0.2 ms for ResNet-18 on NVLink), DDP's 25 MB buckets,
  and no compression, unless the step is short enough that the all-reduce is a visible share of it (below).
- **slow link** (Ethernet, NCCL's socket transport, a PCIe path without peer access): ``bf16`` (half the bytes
  on the wire; parameters, optimizer and the fp32 gradient buffer unchanged), graph mode's ``bucketed`` reducer
  (buckets all-reduced while the backward runs, so the link works during compute instead of after it), and
  buckets sized from the link: those whose bf16 bytes take about :data:`BUCKET_WIRE_S` on it, between
  :data:`MIN_BUCKET_MB` and 25 MB.
- CPU runs (gloo) and single-process runs: nothing measured, no compression (the ranks share a host).

**The step's own compute time.** Where the link was measured (or given by :data:`LINK_ENV`), every rank also
times the step's compute (:func:`ddp_train.model.compute_probe.measure`: forward and backward of a throwaway copy
of the model on a synthetic batch of the run's shape, as graph mode runs it unless the run will be eager, the
slowest rank's time) and the plan carries a :class:`Prediction`: ``t_step = t_compute + exposed``, the
all-reduce time ``t_comm = 2(n-1)/n x wire bytes / busbw`` of which the bucketed reducer and eager DDP hide
``min(f x t_comm, t_compute)`` behind the backward (:data:`OVERLAP_FRACTION`; graph mode's flat reducer hides
none), and the predicted share of one GPU's pace ``t_compute / t_step``, which the run's first line states. The
bf16 path also pays its casts (:data:`CAST_BYTES_PER_PARAM` more bytes through device memory per gradient than
fp32's gather, at :data:`CAST_BYTES_PER_S`), exposed. The prediction decides the compression: on a slow link
bf16 only when it is predicted to gain at least :data:`COMPRESSION_MIN_GAIN` of that share over fp32 buckets (a
step whose compute hides the fp32 all-reduce keeps its gradients' precision on the wire); on a fast link, where
the flat reducer's all-reduce is exposed whole after the backward, bf16 when the run computes in bf16 (the
gradients come from bf16 arithmetic already, and bf16 reductions are what Megatron-LM and FSDP's mixed precision
do by default) in graph mode and it is predicted to gain as much over fp32 flat: ResNet-18's 4.7 ms step on 4
NVLink GPUs (+1.8 points predicted), not ResNet-50's 64 ms one over NVLink (+0.3).

``powersgd`` (never picked by auto: it changes the optimisation, not only the rounding) is torch's PowerSGD
hook (rank :data:`POWERSGD_RANK`, error feedback, plain all-reduce for the first
:data:`POWERSGD_START_ITER` steps) on eager DDP; PowerSGD keeps per-step state on the host, so a run with it is
eager (``ddp_train.config.step_plan``). ``bf16`` in eager mode is a DDP communication hook (:func:`bf16_hook`, as
torch's ``bf16_compress_hook``, which works with gloo too); in graph mode the flat and bucketed reducers
cast the backward's gradients straight into a bf16 buffer, all-reduce it and cast the average back into their
fp32 buffer (``ddp_train.comm.flat_reduce``).

``DDP_TRAIN_LINK_GBPS`` (a number, GB/s busbw) skips the measurement and takes that figure instead, for links
the start-up measurement misjudges (a shared link busy at start-up, say).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from ddp_train.errors import env_number
from ddp_train.visible import visible

SLOW_LINK_GBPS = 25.0
PROBE_BYTES = 32 << 20
PROBE_ITERS = 3
BUCKET_WIRE_S = 0.004
MIN_BUCKET_MB = 4.0
DEFAULT_BUCKET_MB = 25.0
OVERLAP_FRACTION = 0.5  # share of a bucketed all-reduce that runs during the backward (fitted 0.33-0.60 on H100)
COMPRESSION_MIN_GAIN = 0.01  # bf16 only when predicted to gain this much of one GPU's pace
# the bf16 path's extra device-memory traffic against fp32's gather (fp32 read + bf16 written, then bf16 read +
# fp32 written: 12 bytes a gradient, against the fp32 copy's 8), and the rate of such casting copies (measured on
# an H200: ResNet-18's 11.2 M gradients cast to bf16 and back in 66 us, 2.0 TB/s)
CAST_BYTES_PER_PARAM = 4
CAST_BYTES_PER_S = 2.0e12
POWERSGD_RANK = 4
POWERSGD_START_ITER = 10
LINK_ENV = "DDP_TRAIN_LINK_GBPS"


@dataclass(frozen=True)
class Prediction:
    """What a plan is predicted to cost per step (seconds) on the measured link."""

    compute_s: float  # the step's compute, timed at start-up
    comm_s: float  # the gradients' all-reduce on the link
    exposed_s: float  # the part of it not hidden behind the backward
    cast_s: float = 0.0  # bf16's casts of the gradients (exposed: they run on the step's stream)

    @property
    def efficiency(self) -> float:
        """Predicted share of one GPU's pace: ``t_compute / (t_compute + exposed + casts)``."""
        return self.compute_s / (self.compute_s + self.exposed_s + self.cast_s)

    def describe(self) -> str:
        casts = f", casts {1e3 * self.cast_s:.2f} ms" if self.cast_s else ""
        return (f"predicted {100 * self.efficiency:.0f}% of one GPU's pace (compute {1e3 * self.compute_s:.1f} ms, "
                f"all-reduce {1e3 * self.comm_s:.1f} ms, {1e3 * self.exposed_s:.1f} ms of it exposed{casts})")


@dataclass(frozen=True)
class CommPlan:
    compression: str  # none | bf16 | powersgd
    graph_reducer: str  # flat | bucketed | ddp
    bucket_mb: float
    link_gbps: float | None  # busbw measured at start-up (or from DDP_TRAIN_LINK_GBPS), None when not measured
    reason: str
    predicted: Prediction | None = None  # None: the link or the step's compute was not measured

    def describe(self) -> str:
        said = f"; {self.predicted.describe()}" if self.predicted else ""
        return (f"grad_compression={self.compression} graph_reducer={self.graph_reducer} "
                f"bucket_mb={self.bucket_mb:g}: {self.reason}{said}")


def predict(*, compute_s: float, grad_params: int, busbw_gbps: float, world: int, compression: str,
            graph_reducer: str) -> Prediction:
    """The step's predicted cost (pure): fp32 or bf16 gradients (powersgd counted as bf16: an upper bound) in
    one all-reduce after the backward (flat) or in buckets during it (bucketed, ddp); bf16's casts exposed."""
    wire = grad_params * (4 if compression == "none" else 2)
    comm = 2 * (world - 1) / world * wire / (busbw_gbps * 1e9)
    hidden = 0.0 if graph_reducer == "flat" else min(OVERLAP_FRACTION * comm, compute_s)
    cast = 0.0 if compression == "none" else grad_params * CAST_BYTES_PER_PARAM / CAST_BYTES_PER_S
    return Prediction(compute_s, comm, comm - hidden, cast)


def choose(*, compression: str, graph_reducer: str, bucket_mb: float | None, busbw_gbps: float | None,
           world: int, why_unmeasured: str = "", compute_s: float | None = None,
           grad_params: int | None = None, graph_mode: bool = True, bf16_compute: bool = False) -> CommPlan:
    """The rule (pure): what the auto settings become for a link of ``busbw_gbps`` (None: not measured);
    ``compute_s`` (the step's compute, None: not measured) and ``grad_params`` (the gradients' element count) add
    the prediction, let a slow link's step that hides fp32 buckets keep fp32 and, with ``bf16_compute`` (the run
    computes in bf16) in graph mode, a fast link's short step all-reduce in bf16."""
    slow = busbw_gbps is not None and busbw_gbps < SLOW_LINK_GBPS
    if busbw_gbps is None:
        link = why_unmeasured or "link not measured"
    else:
        link = (f"link {busbw_gbps:.1f} GB/s busbw {'<' if slow else '>='} {SLOW_LINK_GBPS:g}: "
                f"{'slow' if slow else 'fast'}")
    timed = busbw_gbps is not None and world > 1 and bool(compute_s) and bool(grad_params)
    picked = []
    if compression == "auto":
        compression = "bf16" if slow else "none"
        if slow and timed and graph_reducer in ("auto", "bucketed", "ddp"):
            shape = dict(compute_s=compute_s, grad_params=grad_params, busbw_gbps=busbw_gbps, world=world,
                         graph_reducer="bucketed")
            gain = predict(**shape, compression="bf16").efficiency - predict(**shape, compression="none").efficiency
            if gain < COMPRESSION_MIN_GAIN:
                compression = "none"
                picked.append(f"compression none (bf16 would gain {100 * gain:.1f} points: the backward hides "
                              "the fp32 buckets)")
        elif not slow and timed and graph_mode and bf16_compute and graph_reducer in ("auto", "flat"):
            shape = dict(compute_s=compute_s, grad_params=grad_params, busbw_gbps=busbw_gbps, world=world,
                         graph_reducer="flat")
            gain = predict(**shape, compression="bf16").efficiency - predict(**shape, compression="none").efficiency
            if gain >= COMPRESSION_MIN_GAIN:
                compression = "bf16"
                picked.append(f"compression bf16 (gains {100 * gain:.1f} points over fp32: the short step leaves "
                              "the all-reduce exposed)")
        if not picked:
            picked.append(f"compression {compression}")
    if graph_reducer == "auto":
        graph_reducer = "bucketed" if slow else "flat"
        picked.append(f"{graph_reducer} reducer")
    if bucket_mb is None:
        bucket_mb = DEFAULT_BUCKET_MB
        if slow and world > 1:
            wire = 2 * (world - 1) / world * (0.5 if compression == "bf16" else 1.0)
            fit = busbw_gbps * 1e9 * BUCKET_WIRE_S / wire / (1 << 20)
            bucket_mb = round(min(DEFAULT_BUCKET_MB, max(MIN_BUCKET_MB, fit)), 1)
        picked.append(f"{bucket_mb:g} MB buckets")
    predicted = predict(compute_s=compute_s, grad_params=grad_params, busbw_gbps=busbw_gbps, world=world,
                        compression=compression, graph_reducer=graph_reducer if graph_mode else "ddp") if timed else None
    return CommPlan(compression, graph_reducer, bucket_mb, busbw_gbps,
                    f"{link} (auto: {', '.join(picked)})" if picked else f"{link}; all set by flags", predicted)


def measure_link(device: torch.device, world: int) -> float:
    """busbw (GB/s) of a :data:`PROBE_BYTES` fp32 all-reduce over the default group, the slowest rank's time."""
    t = torch.ones(PROBE_BYTES // 4, device=device)
    dist.all_reduce(t)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(PROBE_ITERS):
        dist.all_reduce(t)
    sync()
    took = slowest((time.perf_counter() - start) / PROBE_ITERS, device)
    return 2 * (world - 1) / world * PROBE_BYTES / took / 1e9


def decide(*, compression: str, graph_reducer: str, bucket_mb: float | None, device: torch.device, world: int,
           distributed: bool, compute_probe: Callable[[], tuple[float, int]] | None = None,
           graph_mode: bool = True, bf16_compute: bool = False) -> CommPlan:
    """Resolve the auto settings of ``--grad-compression``, ``--graph-reducer`` and ``--bucket-mb`` (as asked:
    ``compression``, ``graph_reducer``, ``bucket_mb``) and say why; the rest of the run reads the plan.
    ``compute_probe`` times the step's compute on this rank and counts the gradients' elements (seconds, count;
    called on every rank, only where the link was measured or given); ``graph_mode``: whether the step will run
    as one CUDA graph (eager DDP overlaps its buckets with the backward whatever the graph reducer);
    ``bf16_compute``: whether the run computes in bf16 (autocast)."""
    auto = compression == "auto" or graph_reducer == "auto" or bucket_mb is None
    busbw, why = None, ""
    if not (distributed and world > 1):
        why = "one process: nothing to all-reduce"
    elif device.type != "cuda":
        why = "CPU ranks (gloo): link not measured, the fast-link defaults"
    elif auto and os.environ.get(LINK_ENV):
        busbw = env_number(LINK_ENV, high=1e6, fix="set it to the link's busbw in GB/s (e.g. 4.5) or unset it to "
                           "measure at start-up")
    elif auto:
        busbw = measure_link(device, world)
    compute_s = grad_params = None
    if busbw is not None and compute_probe is not None:
        compute_s, grad_params = timed_compute(compute_probe, device)
    plan = choose(compression=compression, graph_reducer=graph_reducer, bucket_mb=bucket_mb,
                  busbw_gbps=busbw, world=world, why_unmeasured=why, compute_s=compute_s, grad_params=grad_params,
                  graph_mode=graph_mode, bf16_compute=bf16_compute)
    if busbw is not None and os.environ.get(LINK_ENV):
        plan = replace(plan, reason=f"{LINK_ENV}: " + plan.reason)
    if not (distributed and world > 1):
        plan = CommPlan("none", plan.graph_reducer, plan.bucket_mb, None, plan.reason)
    return plan


def timed_compute(compute_probe: Callable[[], tuple[float, int]], device: torch.device
                  ) -> tuple[float | None, int | None]:
    """The slowest rank's compute time and the gradients' element count; (None, None) on every rank when the
    probe failed on any (out of memory beside another process, say): the plan then rests on the link alone, and
    each rank whose probe failed says why in one line. Every rank takes part in the one all-reduce either way."""
    failed = ""
    try:
        seconds, params = compute_probe()
    except Exception as exc:  # noqa: BLE001 - a prediction is not worth the run
        seconds, params = 0.0, None
        failed = f"{type(exc).__name__}: {visible((str(exc).strip().splitlines() or [''])[0], limit=160)}"
    t = torch.tensor([seconds, 1.0 if failed else 0.0], device=device, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    slowest_s, any_failed = t.tolist()
    if any_failed:
        if failed:
            print(f"ddp-train: warning: timing the step's compute failed ({failed}); the "
                  "gradients' plan rests on the link alone, with no prediction", file=sys.stderr, flush=True)
        return None, None
    return slowest_s, params


def slowest(seconds: float, device: torch.device) -> float:
    """The largest of every rank's ``seconds`` (all ranks decide alike)."""
    t = torch.tensor([seconds], device=device, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def comm_dtype(plan: CommPlan) -> torch.dtype:
    """The dtype graph mode's flat/bucketed reducers all-reduce in."""
    return torch.bfloat16 if plan.compression == "bf16" else torch.float32


def bf16_hook(group, bucket):
    """DDP communication hook: all-reduce the bucket as bf16 (half the bytes), averaged, back into fp32.

    torch's ``bf16_compress_hook`` does the same but refuses anything but NCCL; this one runs on gloo too."""
    group = group if group is not None else dist.group.WORLD
    buf = bucket.buffer()
    comp = buf.to(torch.bfloat16).div_(dist.get_world_size(group))
    fut = dist.all_reduce(comp, group=group, async_op=True).get_future()

    def done(f):
        out = bucket.buffer()
        out.copy_(f.value()[0])
        return out

    return fut.then(done)


def register_hook(model, plan: CommPlan) -> None:
    """Eager DDP: the communication hook of ``plan`` (none: DDP's own fp32 all-reduce)."""
    if plan.compression == "bf16":
        model.register_comm_hook(None, bf16_hook)
    elif plan.compression == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=POWERSGD_RANK,
                                            start_powerSGD_iter=POWERSGD_START_ITER, use_error_feedback=True,
                                            warm_start=True)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
