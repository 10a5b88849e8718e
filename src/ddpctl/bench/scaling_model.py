"""The scaling model of the forecast (pure): named links, the latency + bandwidth fit of an all-reduce probe, the
hierarchical all-reduce cost, ddp-train's communication plan and the step time. ``bench.forecast`` applies it to a
report (its docstring and docs/bench.md, "The scaling forecast", give the model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddpctl.bench import efficiency as eff

# ddp-train's communication rule (ddp_train's compression module; ddpctl never imports torch, so the figures are
# mirrored here and a unit test checks them against the source)
SLOW_LINK_GBPS = 25.0
PROBE_BYTES = 32 << 20
BUCKET_WIRE_S = 0.004
MIN_BUCKET_MB = 4.0
DEFAULT_BUCKET_MB = 25.0
OVERLAP_FRACTION = 0.5  # the rule's own overlap assumption (the forecast fits its f from the cells instead)
COMPRESSION_MIN_GAIN = 0.01
CAST_BYTES_PER_PARAM = 4  # bf16's casts: device-memory bytes a gradient beyond fp32's gather ...
CAST_BYTES_PER_S = 2.0e12  # ... at this rate
GRAD_BYTES_PER_PARAM = 4

FORECAST_NODES = (1, 2, 8, 64)  # the report's grid: nodes ...
FORECAST_GPUS_PER_NODE = 8  # ... of this many GPUs and of the host's own count
ETHERNET_EFFICIENCY = 0.88  # share of the line rate an all-reduce reaches over Ethernet (headers, TCP/RoCE)
INFINIBAND_EFFICIENCY = 0.96


@dataclass(frozen=True)
class Link:
    """A network between nodes: the bandwidth an all-reduce gets out of one NIC, and the latency per hop."""

    name: str
    description: str
    gbytes_per_s: float  # per NIC, GB/s (1e9 bytes)
    latency_s: float  # per step of the ring/tree
    nics: int = 1  # NICs per node (``8x400gbe``: one per GPU, a rail-optimised cluster)

    @property
    def node_bytes_per_s(self) -> float:
        return self.gbytes_per_s * 1e9 * self.nics


def _ethernet(gbit: int, latency_us: float) -> Link:
    return Link(f"{gbit}gbe", f"{gbit} GbE ({gbit * ETHERNET_EFFICIENCY / 8:.3g} GB/s, {latency_us:g} us/hop)",
                gbit * ETHERNET_EFFICIENCY / 8, latency_us * 1e-6)


# Stated figures: Ethernet at 88% of its line rate, NCCL over TCP sockets (25 us per hop) up to 25 GbE and over
# RoCE (8-10 us) above; InfiniBand NDR (400 Gb/s) at 96%, 3 us per hop.
NAMED_LINKS: dict[str, Link] = {link.name: link for link in (
    _ethernet(10, 25), _ethernet(25, 25), _ethernet(100, 10), _ethernet(200, 8), _ethernet(400, 8),
    Link("ib-ndr", f"InfiniBand NDR 400 Gb/s ({400 * INFINIBAND_EFFICIENCY / 8:.3g} GB/s, 3 us/hop)",
         400 * INFINIBAND_EFFICIENCY / 8, 3e-6),
)}
MEASURED = "measured"  # the report's own two-node socket link (its fitted probe)
DEFAULT_LINKS = ("10gbe", "25gbe", "100gbe", "400gbe", "ib-ndr", MEASURED)


# ---------------------------------------------------------------------------------- the all-reduce


@dataclass(frozen=True)
class Fit:
    """``t(bytes) = alpha + 2(n-1)/n x bytes / busbw`` for one probed world size."""

    world: int
    alpha_s: float
    busbw: float  # bytes/s
    worst_error: float  # largest relative error of the fit over the probe's points

    def time(self, nbytes: float) -> float:
        return self.alpha_s + eff.bus_factor(self.world) * nbytes / self.busbw


def fit_probe(results: list[dict], world: int) -> Fit | None:
    """Least squares of ``t = alpha + x / busbw`` (``x = 2(n-1)/n x bytes``), each point weighted by ``1/t``."""
    pts = [(eff.bus_factor(world) * float(r["bytes"]), float(r["time_us"]) * 1e-6) for r in results
           if isinstance(r, dict) and r.get("bytes") and r.get("time_us")]
    if world < 2 or not pts:
        return None
    # minimise sum(((alpha + beta x - t) / t)^2): the normal equations of a weighted linear fit
    s00 = sum(1 / t**2 for _, t in pts)
    s01 = sum(x / t**2 for x, t in pts)
    s11 = sum(x * x / t**2 for x, t in pts)
    r0 = sum(1 / t for _, t in pts)
    r1 = sum(x / t for x, t in pts)
    det = s00 * s11 - s01 * s01
    alpha, beta = ((s11 * r0 - s01 * r1) / det, (s00 * r1 - s01 * r0) / det) if det > 0 else (0.0, 0.0)
    if beta <= 0 or alpha < 0:  # one size, or a curve no line fits: bandwidth only, through the largest point
        x, t = max(pts)
        alpha, beta = 0.0, t / x
    worst = max(abs(alpha + beta * x - t) / t for x, t in pts)
    return Fit(world, alpha, 1 / beta, worst)


@dataclass(frozen=True)
class Network:
    """What the forecast knows of a cluster: the in-node fits (by GPU count) and the link between nodes."""

    local: dict[int, Fit]
    link: Link | None

    def local_fit(self, gpus: int) -> Fit | None:
        """The probed fit at ``gpus``, else the largest probed count (its latency and busbw held)."""
        if gpus in self.local:
            return self.local[gpus]
        return self.local[max(self.local)] if self.local else None

    def allreduce(self, nbytes: float, nodes: int, gpus: int) -> float:
        """Seconds one all-reduce of ``nbytes`` per GPU takes on ``nodes`` x ``gpus``."""
        t = 0.0
        if gpus > 1:
            f = self.local_fit(gpus)
            if f is None:
                raise ValueError("no in-node all-reduce probe to forecast from")
            t += f.alpha_s + eff.bus_factor(gpus) * nbytes / f.busbw  # reduce-scatter + all-gather in the node
        if nodes > 1:
            if self.link is None:
                raise ValueError("no link between nodes to forecast from")
            hops = 2 * min(nodes - 1, math.ceil(math.log2(nodes)))
            t += hops * self.link.latency_s + eff.bus_factor(nodes) * nbytes / self.link.node_bytes_per_s
        return t

    def startup_busbw_gbps(self, nodes: int, gpus: int) -> float:
        """The busbw ddp-train's start-up measurement would see (a 32 MiB fp32 all-reduce over the whole job)."""
        world = nodes * gpus
        return eff.bus_factor(world) * PROBE_BYTES / self.allreduce(PROBE_BYTES, nodes, gpus) / 1e9


# the bandwidth term of a rescaled all-reduce takes at least this share of the start-up time: a start-up
# measurement at or below the fit's latency keeps the model monotonic (a faster measurement, a faster link)
MIN_BANDWIDTH_SHARE = 0.05


def rescaled_busbw(alpha_s: float, startup_gbps: float, world: int) -> float:
    """The bandwidth (bytes/s) with which ``alpha + 2(n-1)/n x 32 MiB / busbw`` takes the time a start-up
    measurement of ``startup_gbps`` took: exactly where the bandwidth term is at least
    :data:`MIN_BANDWIDTH_SHARE` of that time, else that share."""
    x = eff.bus_factor(world) * PROBE_BYTES
    t = x / (startup_gbps * 1e9)
    return x / max(t - alpha_s, MIN_BANDWIDTH_SHARE * t)


def rescaled_link(net: Network, link: Link, startup_gbps: float, nodes: int, gpus: int) -> Link:
    """``link`` with the bandwidth with which the hierarchical all-reduce of 32 MiB over ``nodes`` x ``gpus``
    takes the time a start-up measurement of ``startup_gbps`` took: that time less the in-node part and the
    hops' latency is the network's share (at least :data:`MIN_BANDWIDTH_SHARE` of the time)."""
    t = eff.bus_factor(nodes * gpus) * PROBE_BYTES / (startup_gbps * 1e9)
    fixed = net.allreduce(PROBE_BYTES, nodes, gpus) - eff.bus_factor(nodes) * PROBE_BYTES / link.node_bytes_per_s
    node_bytes_per_s = eff.bus_factor(nodes) * PROBE_BYTES / max(t - fixed, MIN_BANDWIDTH_SHARE * t)
    return Link(link.name, link.description, node_bytes_per_s / link.nics / 1e9, link.latency_s, link.nics)


@dataclass(frozen=True)
class CommPlan:
    compression: str  # none | bf16
    reducer: str  # flat (one all-reduce after the backward) | bucketed (during the backward) | ddp (eager buckets)
    bucket_mb: float

    @property
    def overlaps(self) -> bool:
        return self.reducer != "flat"


def _rule_efficiency(t_1: float, params: int, busbw_gbps: float, world: int, bytes_per_param: int,
                     overlaps: bool = True) -> float:
    """ddp-train's start-up prediction (its compression module's ``predict``): gradients of ``bytes_per_param``
    in buckets during the backward (``overlaps``) or in one all-reduce after it; bf16's casts exposed."""
    comm = eff.bus_factor(world) * params * bytes_per_param / (busbw_gbps * 1e9)
    hidden = min(OVERLAP_FRACTION * comm, t_1) if overlaps else 0.0
    cast = params * CAST_BYTES_PER_PARAM / CAST_BYTES_PER_S if bytes_per_param == 2 else 0.0
    return t_1 / (t_1 + comm - hidden + cast)


def auto_plan(busbw_gbps: float | None, world: int, *, graph: bool = True, t_1: float | None = None,
              params: int | None = None, bf16_compute: bool = True) -> CommPlan:
    """ddp-train's ``auto`` rule for a link of ``busbw_gbps`` (None: not measured, e.g. CPU ranks); with the
    step's compute ``t_1`` and the parameter count, a slow link whose step hides fp32 buckets keeps fp32, and a
    fast link's short graph-mode step of a bf16 run (``bf16_compute``: ddp-train's default on a GPU) all-reduces
    in bf16 where that gains enough."""
    slow = busbw_gbps is not None and busbw_gbps < SLOW_LINK_GBPS
    compression = "bf16" if slow else "none"
    if slow and world > 1 and t_1 and params:
        gain = _rule_efficiency(t_1, params, busbw_gbps, world, 2) - _rule_efficiency(t_1, params, busbw_gbps, world,
                                                                                      GRAD_BYTES_PER_PARAM)
        compression = "bf16" if gain >= COMPRESSION_MIN_GAIN else "none"
    elif busbw_gbps is not None and not slow and graph and bf16_compute and world > 1 and t_1 and params:
        gain = (_rule_efficiency(t_1, params, busbw_gbps, world, 2, overlaps=False)
                - _rule_efficiency(t_1, params, busbw_gbps, world, GRAD_BYTES_PER_PARAM, overlaps=False))
        compression = "bf16" if gain >= COMPRESSION_MIN_GAIN else "none"
    reducer = ("bucketed" if slow else "flat") if graph else "ddp"
    bucket_mb = DEFAULT_BUCKET_MB
    if slow and world > 1:
        wire = eff.bus_factor(world) * (0.5 if compression == "bf16" else 1.0)
        bucket_mb = round(min(DEFAULT_BUCKET_MB, max(MIN_BUCKET_MB, busbw_gbps * 1e9 * BUCKET_WIRE_S / wire / (1 << 20))),
                          1)
    return CommPlan(compression, reducer, bucket_mb)


def comm_time(params: int, plan: CommPlan, allreduce) -> float:
    """Seconds of all-reduce per step: the gradients in ``plan``'s dtype, in one call (flat) or in buckets of
    ``bucket_mb`` MB of fp32 gradients; ``allreduce(nbytes)`` is one call's time."""
    total = params * (2 if plan.compression == "bf16" else GRAD_BYTES_PER_PARAM)
    if plan.reducer == "flat":
        return allreduce(total)
    buckets = max(1, math.ceil(params * GRAD_BYTES_PER_PARAM / (plan.bucket_mb * (1 << 20))))
    return buckets * allreduce(total / buckets)


# --------------------------------------------------------------------------------------- the step


@dataclass(frozen=True)
class StepFit:
    """The two fitted terms of the step model and the cells they came from."""

    overhead_s: float  # o
    overlap: float  # f: the share of a bucketed all-reduce that runs during the backward
    overhead_from: tuple[str, ...]
    overlap_from: tuple[str, ...]


def hidden_time(t_1: float, t_comm: float, plan: CommPlan, fit: StepFit) -> float:
    """Seconds of the all-reduce hidden behind the backward: ``min(f x t_comm, t_1)`` with buckets, none flat."""
    return min(fit.overlap * t_comm, t_1) if plan.overlaps else 0.0


def step_time(t_1: float, t_comm: float, plan: CommPlan, fit: StepFit) -> float:
    return t_1 + fit.overhead_s + t_comm - hidden_time(t_1, t_comm, plan, fit)


def fit_step(points: list[dict], *, workload: str) -> StepFit:
    """``o`` and ``f`` from measured cells (dicts with workload, key, t_1, t_step, t_comm, overlaps): ``o`` the
    median of ``t_step - t_1 - t_comm`` over the flat cells of the workload (of every workload when it has
    none; 0 when no flat cell ran); ``f`` the median of ``(t_comm - (t_step - t_1 - o)) / t_comm`` over its
    overlapping cells (likewise; 0, no overlap, when none ran), between 0 and 1."""
    def pick(overlapping: bool) -> list[dict]:
        mine = [p for p in points if p["overlaps"] == overlapping and p["workload"] == workload]
        return mine or [p for p in points if p["overlaps"] == overlapping]

    flat = pick(False)
    o = eff.median([p["t_step"] - p["t_1"] - p["t_comm"] for p in flat]) if flat else 0.0
    o = max(0.0, o)
    over = pick(True)
    f = eff.median([(p["t_comm"] - (p["t_step"] - p["t_1"] - o)) / p["t_comm"] for p in over]) if over else 0.0
    return StepFit(o, min(1.0, max(0.0, f)), tuple(p["key"] for p in flat), tuple(p["key"] for p in over))


# ------------------------------------------------------------------------------------ from a report
