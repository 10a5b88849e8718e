"""The arithmetic of data-parallel scaling. Pure functions, no I/O; every figure in the report comes from here.

Definitions (N = number of GPUs/processes, per-GPU batch held constant, so per-GPU work per step is fixed):

- speedup ``S(N) = ips(N) / ips(1)``; scaling efficiency ``E(N) = ips(N) / (N * ips(1))``.
  ``ips(1)`` is the 1-GPU baseline of the same workload and data pipeline (the ``single`` strategy when it
  ran, else the same strategy on one GPU).
- all-reduce bus bandwidth (the nccl-tests definition): ``algbw = bytes / t``,
  ``busbw = algbw * 2(N-1)/N``. A ring all-reduce moves ``2(N-1)/N * bytes`` through each GPU's link, so
  busbw is comparable across N and with the link's rate.
- gradient all-reduce lower bound: ``t_comm >= 2(N-1)/N * grad_bytes / busbw``, with ``grad_bytes`` the
  bytes DDP all-reduces per step (every trainable parameter in its dtype: fp32 here, also under bf16
  autocast, which keeps fp32 parameters and gradients) and ``busbw`` the best bus bandwidth the probe
  measured for that N (its peak over message sizes; DDP's 25 MB buckets usually run somewhat slower, so the
  bound is optimistic by design).
- step-time model: at N GPUs a step costs ``t_compute + t_comm_exposed``, where ``t_compute`` is the
  measured 1-GPU step time (same per-GPU batch, no communication) and ``t_comm_exposed`` is the part of the
  all-reduce not hidden behind the backward pass. DDP overlaps bucket all-reduces with backward, so the
  truth lies between two bounds that this module reports:

  * no overlap (every byte exposed): ``E_no = t_compute / (t_compute + t_comm)``;
  * full overlap (communication hidden until it is longer than compute): ``E_full = t_compute /
    max(t_compute, t_comm)``.

  A measured efficiency below ``E_no`` cannot be blamed on the interconnect's bandwidth alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# The diagnosis labels of a DDP cell (report.md prints them; report.json keeps the key).
COMPUTE = "compute-bound"
COMMUNICATION = "communication-bound"
INPUT = "input-pipeline-bound"
OVERHEAD = "overhead-bound"

# Thresholds of the diagnosis (documented in docs/bench.md).
GOOD_EFFICIENCY = 0.95  # at or above: the GPUs do the work; nothing to fix in the scaling
PIPELINE_RATIO = 1.3  # the device pipeline (data on the GPU) this much faster in the same cell: input is the limit
COMM_SLACK = 1.5  # the extra step time within 1.5x the all-reduce lower bound: communication explains it
DATA_FRACTION = 0.25  # the program reports waiting for data this share of the step: input is the limit


def bus_factor(n: int) -> float:
    """``2(n-1)/n``: bytes through each GPU's link per byte all-reduced (ring), 0 for one GPU."""
    if n < 1:
        raise ValueError(f"world size must be at least 1, got {n}")
    return 2.0 * (n - 1) / n


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in bytes/s."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    return nbytes / seconds


def busbw(nbytes: float, seconds: float, n: int) -> float:
    """Bus bandwidth in bytes/s (nccl-tests): algbw x 2(n-1)/n."""
    return algbw(nbytes, seconds) * bus_factor(n)


def speedup(ips_n: float, ips_1: float) -> float:
    if ips_1 <= 0:
        raise ValueError("the 1-GPU throughput must be positive")
    return ips_n / ips_1


def scaling_efficiency(ips_n: float, ips_1: float, n: int) -> float:
    """``ips(N) / (N * ips(1))``."""
    if n < 1:
        raise ValueError(f"GPU count must be at least 1, got {n}")
    return speedup(ips_n, ips_1) / n


def allreduce_time_lower_bound(grad_bytes: float, n: int, busbw_bytes_per_s: float) -> float:
    """Seconds a ring all-reduce of ``grad_bytes`` takes at least: ``2(n-1)/n * bytes / busbw``."""
    if n == 1:
        return 0.0
    if busbw_bytes_per_s <= 0:
        raise ValueError("bus bandwidth must be positive")
    return bus_factor(n) * grad_bytes / busbw_bytes_per_s


def efficiency_no_overlap(t_compute: float, t_comm: float) -> float:
    """Efficiency the interconnect allows when no communication overlaps compute."""
    if t_compute <= 0:
        raise ValueError("compute time must be positive")
    return t_compute / (t_compute + t_comm)


def efficiency_full_overlap(t_compute: float, t_comm: float) -> float:
    """Efficiency the interconnect allows when communication hides fully behind compute."""
    if t_compute <= 0:
        raise ValueError("compute time must be positive")
    return t_compute / max(t_compute, t_comm)


@dataclass(frozen=True)
class InterconnectBound:
    """What the interconnect allows one DDP cell."""

    grad_bytes: float
    busbw: float  # bytes/s
    t_compute: float  # s, the 1-GPU step
    t_comm: float  # s, lower bound
    eff_no_overlap: float
    eff_full_overlap: float


def interconnect_bound(grad_bytes: float, n: int, busbw_bytes_per_s: float, t_compute: float) -> InterconnectBound:
    t_comm = allreduce_time_lower_bound(grad_bytes, n, busbw_bytes_per_s)
    return InterconnectBound(
        grad_bytes=grad_bytes,
        busbw=busbw_bytes_per_s,
        t_compute=t_compute,
        t_comm=t_comm,
        eff_no_overlap=efficiency_no_overlap(t_compute, t_comm),
        eff_full_overlap=efficiency_full_overlap(t_compute, t_comm),
    )


@dataclass(frozen=True)
class Diagnosis:
    label: str
    reason: str


def diagnose(
    *,
    n: int,
    efficiency: float,
    step_time: float,
    baseline_step_time: float,
    t_comm: Optional[float],
    faster_pipeline_ratio: Optional[float] = None,
    data_fraction: Optional[float] = None,
) -> Diagnosis:
    """One-line verdict for a DDP cell on N GPUs: what limits its throughput.

    Order of the tests: the input pipeline first (a faster pipeline in the same cell, or the program
    waiting for data, proves it), then good scaling (compute-bound), then whether the extra step time over
    one GPU is explained by the all-reduce (communication-bound) or not (overhead-bound: synchronisation,
    stragglers, launch/Python cost).
    """
    if faster_pipeline_ratio is not None and faster_pipeline_ratio >= PIPELINE_RATIO:
        return Diagnosis(INPUT, f"the device pipeline (data on the GPU) runs {faster_pipeline_ratio:.1f}x faster "
                                "in the same cell")
    if data_fraction is not None and data_fraction >= DATA_FRACTION:
        return Diagnosis(INPUT, f"{data_fraction:.0%} of each step waits for input data")
    if n == 1 or efficiency >= GOOD_EFFICIENCY:
        return Diagnosis(COMPUTE, f"scaling efficiency {efficiency:.1%}: the GPUs are busy computing")
    extra = step_time - baseline_step_time
    if t_comm is not None and t_comm > 0 and extra <= COMM_SLACK * t_comm:
        return Diagnosis(COMMUNICATION, f"+{extra * 1e3:.2f} ms/step over 1 GPU, all-reduce needs >= "
                                        f"{t_comm * 1e3:.2f} ms")
    comm = f"all-reduce needs >= {t_comm * 1e3:.2f} ms" if t_comm is not None else "no interconnect figure"
    return Diagnosis(OVERHEAD, f"+{extra * 1e3:.2f} ms/step over 1 GPU but {comm}: synchronisation, "
                               "stragglers or host overhead")


def median(values: list[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def spread(values: list[float]) -> float:
    """Relative spread of repeats: (max - min) / median; 0 for one value."""
    m = median(values)
    return (max(values) - min(values)) / m if m else 0.0
