"""The links a report's DDP cells cross, and what would win a link-bound cell back. Pure: measurements in,
report.json's ``interconnect`` entries and ``link_advice`` out.

Two links: ``local`` (the host's own interconnect: NVLink, PCIe, shared memory) and ``socket`` (the two-node
emulation: NCCL over TCP sockets between two torchrun agents, with ddpctl's NCCL socket settings);
``socket-nccl-defaults`` is the same link with NCCL's own socket defaults, probed to show what those settings
are worth.
"""

from __future__ import annotations

import re

from ddpctl.bench import efficiency as eff
from ddpctl.bench.plan import nodes_of

GRAD_BYTES_PER_PARAM = 4  # DDP all-reduces gradients in the parameters' dtype: fp32 (bf16 autocast keeps fp32 params)
WIRE_BYTES = {"bf16": 2}  # --grad-compression: bytes per gradient element on the wire (PowerSGD: not modelled)


# ddp-train's first-line reason for its communication plan starts so where it measured (or was given) the link;
# the summary's own field, link_busbw_gbps, is read first (runs from before it was printed have only the reason)
_LINK_REASON = re.compile(r"link ([0-9]{1,5}(?:\.[0-9]{1,3})?) GB/s busbw ")


def startup_link_gbps(summary: dict | None) -> float | None:
    """The link busbw (GB/s) a run measured at start-up and chose its communication plan from, None when it did
    not measure one (one rank, CPU)."""
    v = (summary or {}).get("link_busbw_gbps")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v) if 1e-3 <= v < 1e6 else None  # NaN, infinity, below 1 MB/s: not a link's measurement
    reason = (summary or {}).get("comm_reason")
    m = _LINK_REASON.match(reason[:200]) if isinstance(reason, str) else None
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


def grad_bytes(param_count: int, summary: dict | None) -> int:
    """Bytes each rank all-reduces per step: fp32 gradients, bf16 when the run compressed them."""
    comp = (summary or {}).get("grad_compression")
    return param_count * WIRE_BYTES.get(comp, GRAD_BYTES_PER_PARAM)


def probe_for(bench, gpus: int, link: str, nodes: int = 2) -> dict | None:
    """The probe of a cell's own link: the host's at its GPU count, or the socket probe of the two-node shape
    (cells of other node counts have none: the probe runs over two nodes only)."""
    if link == "socket":
        return bench.socket_probes.get((gpus, "socket")) if nodes == 2 else None
    return bench.probes.get(gpus)


def interconnect_entries(bench) -> list[dict]:
    """report.json's ``interconnect``: one entry per probed (world size, link)."""
    found = [((n, "local"), bench.probes.get(n), bench.probe_errors.get(n))
             for n in sorted(set(bench.probes) | set(bench.probe_errors))]
    found += [(k, bench.socket_probes.get(k), bench.socket_probe_errors.get(k))
              for k in sorted(set(bench.socket_probes) | set(bench.socket_probe_errors))]
    out = []
    for (n, link), p, error in found:
        if p is None:
            out.append({"world_size": n, "link": link, "ok": False, "error": error})
            continue
        out.append({"world_size": n, "link": link, "ok": bool(p.get("correct", True)), "error": None,
                    "backend": p.get("backend"), "dtype": p.get("dtype"), "results": p["results"],
                    "peak_busbw_gbps": p["peak_busbw_gbps"], "max_bytes": p["max_bytes"],
                    "busbw_at_max_gbps": p["busbw_at_max_gbps"]})
    return out


def _eff_no_overlap(t_compute: float, t_comm: float) -> float:
    return t_compute / (t_compute + t_comm)


def advice(cells: list[dict], interconnect: list[dict]) -> list[dict]:
    """For every DDP cell whose link matters (the socket cells; local cells diagnosed communication-bound):
    which changes would gain, each with the figure that says by how much at most."""
    socket_gain = {}
    for n in {p["world_size"] for p in interconnect}:
        tuned = next((p for p in interconnect if p["world_size"] == n and p["link"] == "socket" and p["ok"]), None)
        plain = next((p for p in interconnect if p["world_size"] == n and p["link"] == "socket-nccl-defaults"
                      and p["ok"]), None)
        if tuned and plain:
            socket_gain[n] = (plain["busbw_at_max_gbps"], tuned["busbw_at_max_gbps"])
    out = []
    for c in cells:
        ic, d, summ = c.get("interconnect"), c.get("diagnosis"), c.get("summary") or {}
        if not (c["ok"] and ic and d) or (c.get("link") != "socket" and d["label"] != "communication-bound"):
            continue
        t_c, t_comm = ic["t_compute_s"], ic["t_comm_lb_s"]
        gains = []
        comp = summ.get("grad_compression") or "none"
        if comp == "none" and t_comm > 0.05 * t_c:
            gains.append(f"bf16 gradients (--grad-compression bf16; auto picks it on a slow link): t_comm >= "
                         f"{t_comm * 1e3:.1f} -> {t_comm * 5e2:.1f} ms, no-overlap bound "
                         f"{_eff_no_overlap(t_c, t_comm):.1%} -> {_eff_no_overlap(t_c, t_comm / 2):.1%}")
        if summ.get("step_mode") == "graph" and summ.get("graph_reducer") == "flat":
            gains.append(f"the bucketed reducer (--graph-reducer bucketed; auto on a slow link) overlaps the "
                         f"all-reduce with the backward: up to the full-overlap bound {ic['eff_full_overlap']:.1%}")
        if summ.get("step_mode") == "eager" and t_comm > 0.25 * t_c:
            gains.append("PowerSGD (--grad-compression powersgd, eager steps): low-rank gradients, a few % of "
                         "the bytes, at some cost in convergence (never picked by auto)")
        if c.get("link") == "socket" and nodes_of(c) == 2 and c["gpus"] in socket_gain:
            before, after = socket_gain[c["gpus"]]
            gains.append(f"NCCL socket threads (ddpctl's default where no InfiniBand is found, on in this cell): "
                         f"busbw {before:.1f} -> {after:.1f} GB/s")
        if c.get("link") == "socket":
            gains.append("a faster network (InfiniBand / RoCE: NCCL's IB transport instead of sockets)")
        elif not gains:
            gains.append("a faster link, or more per-GPU work per step (a bigger batch) to hide the all-reduce")
        out.append({"key": c["key"], "link": c.get("link", "local"), "diagnosis": d["label"],
                    "scaling_efficiency": c["scaling_efficiency"], "gains": gains})
    return out


def bound(param_count: int, summary: dict | None, gpus: int, probe: dict, t_compute: float) -> dict:
    """The cell's ``interconnect`` entry: the all-reduce lower bound over the probed link and the two
    efficiency bounds (docs/bench.md)."""
    nbytes = grad_bytes(param_count, summary)
    b = eff.interconnect_bound(nbytes, gpus, probe["peak_busbw_gbps"] * 1e9, t_compute)
    return {"grad_bytes": nbytes, "busbw_gbps": probe["peak_busbw_gbps"], "t_compute_s": b.t_compute,
            "t_comm_lb_s": b.t_comm, "eff_no_overlap": b.eff_no_overlap, "eff_full_overlap": b.eff_full_overlap}
