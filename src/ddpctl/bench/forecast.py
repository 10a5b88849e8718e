"""The scaling forecast: from a report's measured cells and all-reduce probes to N nodes x G GPUs over a named
link. Pure: a report (its ``cells`` and ``interconnect``) in, report.json's ``forecast`` out (docs/bench.md,
"The scaling forecast").

The model, per workload (ddp-train's device pipeline, its default communication plan):

- **all-reduce cost**: each probed link is fitted to ``t(bytes) = alpha + 2(n-1)/n x bytes / busbw`` (a latency
  and a bandwidth; every probe point weighted by its own time, so small and large messages count alike). On N
  nodes of G GPUs the all-reduce is hierarchical: reduce-scatter in the node, all-reduce between the nodes
  (each node's network carries ``2(N-1)/N x bytes``), all-gather in the node; the in-node part is the measured
  local fit at G GPUs (the largest probed count when G was not probed), the network part a named link's
  bandwidth and per-hop latency, ``2 min(N-1, ceil(log2 N))`` hops (ring or tree, the shorter);
- **the communication plan** is ddp-train's ``--grad-compression auto`` rule (``ddp_train`` ``compression.choose``,
  mirrored in :func:`auto_plan`): the busbw a 32 MiB all-reduce reaches on the configuration decides one flat
  all-reduce after the backward (fast link: fp32, bf16 where the step's compute ``t_1`` is short enough that bf16
  gains a point) or gradients in buckets all-reduced during the backward (slow link, buckets sized from the
  link), bf16 unless the step's compute (``t_1``; a cell's own start-up timing where its summary has one) hides
  the fp32 buckets nearly as well;
- **the step**: ``t_step = t_1 + o + exposed``: ``t_1`` the 1-GPU step (no communication), ``o`` the per-step
  cost of running distributed beyond the all-reduce (fitted from the measured flat cells; bf16's casts, a few
  hundredths of a millisecond, are in it where those cells ran bf16, not a term of their own), ``exposed`` the
  all-reduce time not hidden behind the backward: all of it with the flat reducer; ``t_comm - min(f x t_comm,
  t_1)`` with buckets, where ``f``, the overlap fraction (the share of the all-reduce that runs while the
  backward computes), is fitted from the measured bucketed cells, and no more than the step's compute hides;
- **validation**: every measured multi-GPU DDP cell of the device pipeline, forecast with ``o`` and ``f``
  fitted from the other cells only (its own step time unused), beside the measurement; a cell of more than two
  emulated nodes (``--socket-nodes``) over the measured link fitted from the two-node probe (it has no probe of
  its own), so its error is the model's beyond the nodes it was fitted on.
"""

from __future__ import annotations

from ddpctl.bench import efficiency as eff
from ddpctl.bench.plan import PIPELINE_ALIASES, WORKLOADS, nodes_of
from ddpctl.bench.scaling_model import (
    DEFAULT_LINKS,
    FORECAST_GPUS_PER_NODE,
    FORECAST_NODES,
    MEASURED,
    NAMED_LINKS,
    PROBE_BYTES,
    CommPlan,
    Fit,
    Link,
    Network,
    auto_plan,
    comm_time,
    fit_probe,
    fit_step,
    hidden_time,
    rescaled_busbw,
    rescaled_link,
    step_time,
)


def _pipeline(c: dict) -> str:
    return PIPELINE_ALIASES.get(c.get("pipeline"), c.get("pipeline"))


def _ips(c: dict | None) -> float | None:
    return c["images_per_sec"]["median"] if c and c.get("ok") and c.get("images_per_sec") else None


def _ips_of_run(r: dict) -> bool:
    return bool(r.get("ok")) and isinstance(r.get("images_per_sec"), (int, float)) and r["images_per_sec"] > 0


def _fits(report: dict, link: str) -> dict[int, Fit]:
    """The probes of ``link`` (``local`` or ``socket``) fitted, by world size."""
    fits = {p["world_size"]: fit_probe(p["results"], p["world_size"]) for p in report.get("interconnect") or []
            if p.get("results") and p.get("link", "local") == link and p.get("ok", True)}
    return {n: f for n, f in fits.items() if f}


def local_fits(report: dict) -> dict[int, Fit]:
    return _fits(report, "local")


def socket_fits(report: dict) -> dict[int, Fit]:
    return _fits(report, "socket")


def measured_link(report: dict) -> Link | None:
    """The report's own two-node socket link as a :class:`Link`: the fit of its socket probe at the smallest
    world size (2 nodes x 1 GPU at 2: all of it crosses the link)."""
    fits = socket_fits(report)
    if not fits:
        return None
    f = fits[min(fits)]
    per_hop = f.alpha_s / (2 * (f.world - 1))
    return Link(MEASURED, f"this host's two-node socket emulation ({f.busbw / 1e9:.2g} GB/s, "
                          f"{per_hop * 1e6:.0f} us/hop, fitted)", f.busbw / 1e9, per_hop)


def parse_link(name: str, report: dict | None = None) -> Link:
    """A link by name: a :data:`NAMED_LINKS` key, optionally ``Kx`` (K NICs per node), or ``measured``."""
    text = name.strip().lower()
    nics = 1
    if "x" in text and text.split("x", 1)[0].isdigit():
        count, text = text.split("x", 1)
        nics = int(count)
        if nics < 1:
            raise ValueError(f"link {name!r}: the NIC count must be at least 1")
    if text == MEASURED:
        link = measured_link(report or {})
        if link is None:
            raise ValueError(f"link {name!r}: this report has no socket probe (run ddpctl bench with --links socket)")
    elif text in NAMED_LINKS:
        link = NAMED_LINKS[text]
    else:
        raise ValueError(f"unknown link {name!r} (known: {', '.join([*NAMED_LINKS, MEASURED])}, "
                         "each optionally prefixed by NICs per node, e.g. 8x400gbe)")
    if nics == 1:
        return link
    return Link(f"{nics}x{link.name}", f"{nics} x {link.description}", link.gbytes_per_s, link.latency_s, nics)


def _baseline(cells: list[dict], workload: str) -> dict | None:
    """The fastest 1-GPU cell of ddp-train's own pipelines (not the classic program)."""
    ones = [c for c in cells if c["workload"] == workload and c["gpus"] == 1 and _ips(c) and c.get("step_time_s")
            and _pipeline(c) != "classic"]
    return max(ones, key=_ips) if ones else None


def _modelled(c: dict) -> str | None:
    """Why a multi-GPU cell is outside the model (None: it is in)."""
    if c["strategy"] != "ddp":
        return "DataParallel: one process gathers on GPU 0, no all-reduce"
    if _pipeline(c) == "classic":
        return "the classic program: its CPU input pipeline, not the link, sets its pace"
    if _pipeline(c) == "dataloader":
        return "the CPU DataLoader: the host's CPUs, not the link, set its pace"
    return None


def _cell_plan(c: dict, startup_gbps: float | None, device: str, t_1: float | None = None,
               params: int | None = None) -> CommPlan:
    """The plan a measured cell ran: its summary's compression and graph reducer where it recorded them (the
    bucket size as the rule sizes it), else ddp-train's rule for its link."""
    summary = c.get("summary") or {}
    graph = device == "cuda" and summary.get("step_mode", "graph") == "graph"
    plan = auto_plan(startup_gbps, c["gpus"], graph=graph, t_1=summary.get("step_compute_s") or t_1, params=params)
    ran, reducer = summary.get("grad_compression"), summary.get("graph_reducer")
    if graph and ran in ("none", "bf16") and reducer in ("flat", "bucketed"):
        return CommPlan(ran, reducer, plan.bucket_mb)
    return plan


def _cell_network(c: dict, local: dict[int, Fit], sockets: dict[int, Fit], link: Link | None = None):
    """The all-reduce time function of a measured cell's own link: its probe's fit (the nearest world size when
    that one was not probed). A socket cell of other than two nodes has no probe of its own (the probe runs over
    two nodes): its all-reduce is the hierarchical model's over ``link``, the report's measured link, fitted
    from the two-node probe, so such a cell checks the forecast beyond what it was fitted from.

    A socket cell whose runs recorded the link they measured at start-up (``link_busbw_gbps``, their median)
    gets that link: the bandwidth rescaled so that a 32 MiB all-reduce takes what its runs measured, the latency
    kept. The loopback link varies from run to run (4.8-9.8 GB/s in one 4x H200 report's runs, 10.5 in its
    probe), and each run chose its plan on its own. In-node links keep the probe's fit (NVLink does not vary)."""
    nodes = nodes_of(c)
    startup = c.get("link_busbw_gbps") if c.get("link") == "socket" else None
    if c.get("link") == "socket" and nodes != 2:
        per_node = c["gpus"] // nodes
        if link is None or c["gpus"] % nodes or (per_node > 1 and not local):
            return None  # one GPU a node needs no in-node probe
        net = Network(local, link)
        if startup:
            net = Network(local, rescaled_link(net, link, startup, nodes, per_node))
        return lambda nbytes: net.allreduce(nbytes, nodes, per_node)
    fits = sockets if c.get("link") == "socket" else local
    if not fits:
        return None
    n = c["gpus"] if c["gpus"] in fits else min(fits, key=lambda k: abs(k - c["gpus"]))
    f = fits[n]
    alpha = f.alpha_s * (c["gpus"] - 1) / max(1, n - 1)
    busbw = rescaled_busbw(alpha, startup, c["gpus"]) if startup else f.busbw
    return lambda nbytes: alpha + eff.bus_factor(c["gpus"]) * nbytes / busbw


def _points(report: dict) -> tuple[list[dict], list[dict]]:
    """The measured multi-GPU DDP cells of the device pipeline as fitting points, and the cells left out."""
    cells = report["cells"]
    device = (report.get("plan") or {}).get("device", "cuda")
    local, sockets = local_fits(report), socket_fits(report)
    measured = measured_link(report)
    points, outside = [], []
    for c in cells:
        if not c.get("ok") or c["gpus"] < 2:
            continue
        why = _modelled(c)
        base = _baseline(cells, c["workload"])
        params = c.get("param_count") or (WORKLOADS[c["workload"]].param_count if c["workload"] in WORKLOADS else None)
        net = _cell_network(c, local, sockets, measured)
        if why is None and (base is None or not params or net is None or not c.get("step_time_s")):
            why = "no 1-GPU baseline, parameter count or probe of its link"
        if why:
            outside.append({"key": c["key"], "reason": why})
            continue
        startup = eff.bus_factor(c["gpus"]) * PROBE_BYTES / net(PROBE_BYTES) / 1e9 if device == "cuda" else None
        plan = _cell_plan(c, startup, device, base["step_time_s"], int(params))
        runs = [r["images_per_sec"] / (c["gpus"] * _ips(base)) for r in c.get("runs") or [] if _ips_of_run(r)]
        points.append({"key": c["key"], "workload": c["workload"], "gpus": c["gpus"], "link": c.get("link", "local"),
                       "runs": runs,
                       "t_1": base["step_time_s"], "t_step": c["step_time_s"], "batch": c["batch_size_per_gpu"],
                       "t_comm": comm_time(int(params), plan, net), "overlaps": plan.overlaps, "plan": plan,
                       "efficiency": c.get("scaling_efficiency"), "ips": _ips(c), "startup_gbps": startup})
    return points, outside


def _plan_dict(plan: CommPlan) -> dict:
    return {"grad_compression": plan.compression, "reducer": plan.reducer, "bucket_mb": plan.bucket_mb}


def validate_cells(report: dict) -> list[dict]:
    """For each measured multi-GPU cell: the forecast made without it (its step time unused: ``o`` and ``f``
    fitted from the other cells) beside the measurement; cells outside the model say why."""
    points, outside = _points(report)
    out = []
    for p in points:
        others = [q for q in points if q["key"] != p["key"]]
        fit = fit_step(others, workload=p["workload"])
        t = step_time(p["t_1"], p["t_comm"], p["plan"], fit)
        forecast_eff = p["t_1"] / t
        measured = p["efficiency"]
        out.append({"key": p["key"], "modelled": True, "gpus": p["gpus"], "link": p["link"],
                    "plan": _plan_dict(p["plan"]), "t_comm_s": p["t_comm"], "overhead_s": fit.overhead_s,
                    "overlap": fit.overlap, "fitted_from": sorted(set(fit.overhead_from + fit.overlap_from)),
                    "forecast_efficiency": forecast_eff, "measured_efficiency": measured,
                    "forecast_images_per_sec": p["gpus"] * p["batch"] / t, "measured_images_per_sec": p["ips"],
                    "error_points": None if measured is None else 100 * (forecast_eff - measured),
                    # the spread of the cell's own runs (two or more): a miss inside it is the cell's noise
                    "measured_range": [min(p["runs"]), max(p["runs"])] if len(p["runs"]) > 1 else None,
                    "within_runs": (min(p["runs"]) <= forecast_eff <= max(p["runs"])) if len(p["runs"]) > 1 else None})
    out += [{"key": o["key"], "modelled": False, "reason": o["reason"]} for o in outside]
    order = [c["key"] for c in report["cells"]]
    return sorted(out, key=lambda v: order.index(v["key"]))


def forecast(report: dict, *, nodes: tuple[int, ...] | None = None, gpus_per_node: tuple[int, ...] | None = None,
             links: tuple[str, ...] | None = None, workloads: tuple[str, ...] | None = None) -> dict:
    """report.json's ``forecast``: the model's fitted terms per workload, its rows (workload x link x nodes x
    GPUs per node) and the validation. Raises ValueError for a link it does not know."""
    cells = report["cells"]
    device = (report.get("plan") or {}).get("device", "cuda")
    local = local_fits(report)
    host_gpus = max([c["gpus"] for c in cells if c.get("link", "local") == "local"] or [1])
    gpn = tuple(gpus_per_node or sorted({host_gpus, FORECAST_GPUS_PER_NODE}))
    node_counts = tuple(nodes or FORECAST_NODES)
    names = links or tuple(n for n in DEFAULT_LINKS if n != MEASURED or measured_link(report))
    chosen = [parse_link(n, report) for n in names]
    points, _ = _points(report)
    validation = validate_cells(report)
    out_workloads, rows, notes = [], [], []
    wanted = workloads or tuple(dict.fromkeys(c["workload"] for c in cells))
    for w in wanted:
        base = _baseline(cells, w)
        params = next((c.get("param_count") for c in cells if c["workload"] == w and c.get("param_count")), None)
        params = params or (WORKLOADS[w].param_count if w in WORKLOADS else None)
        if base is None or not params or not local:
            notes.append(f"{w}: no forecast (needs a 1-GPU cell, the parameter count and an in-node probe)")
            continue
        fit = fit_step(points, workload=w)
        t_1, batch = base["step_time_s"], base["batch_size_per_gpu"]
        out_workloads.append({"workload": w, "baseline_key": base["key"], "t_1_s": t_1, "params": int(params),
                              "batch_size_per_gpu": batch, "overhead_s": fit.overhead_s, "overlap": fit.overlap,
                              "overhead_from": list(fit.overhead_from), "overlap_from": list(fit.overlap_from)})
        for link in chosen:
            net = Network(local, link)
            for n in node_counts:
                for g in gpn:
                    if n == 1 and link is not chosen[0]:
                        continue  # one node: no link between nodes, one row per workload and GPU count
                    gbps = net.startup_busbw_gbps(n, g) if device == "cuda" and n * g > 1 else None
                    plan = auto_plan(gbps, n * g, graph=device == "cuda", t_1=t_1, params=int(params))
                    t_comm = comm_time(int(params), plan, lambda b, n=n, g=g, net=net: net.allreduce(b, n, g)) \
                        if n * g > 1 else 0.0
                    t = step_time(t_1, t_comm, plan, fit) if n * g > 1 else t_1
                    hidden = hidden_time(t_1, t_comm, plan, fit)
                    rows.append({"workload": w, "link": link.name if n > 1 else "none", "nodes": n, "gpus_per_node": g,
                                 "gpus": n * g, "startup_busbw_gbps": gbps, "plan": _plan_dict(plan),
                                 "t_comm_s": t_comm, "hidden_fraction": hidden / t_comm if t_comm else 0.0,
                                 "step_time_s": t, "scaling_efficiency": t_1 / t,
                                 "images_per_sec": n * g * batch / t})
    modelled = [v for v in validation if v["modelled"] and v["error_points"] is not None]
    return {
        "model": "t_step = t_1 + o + exposed all-reduce (hierarchical latency + bandwidth fit of the probes; "
                 "ddp-train's auto communication plan); docs/bench.md",
        "links": [{"name": link.name, "description": link.description, "gbytes_per_s": link.gbytes_per_s,
                   "latency_us": link.latency_s * 1e6, "nics_per_node": link.nics} for link in chosen],
        "local_fits": [{"world_size": f.world, "alpha_us": f.alpha_s * 1e6, "busbw_gbps": f.busbw / 1e9,
                        "worst_error": f.worst_error} for f in sorted(local.values(), key=lambda f: f.world)],
        "workloads": out_workloads,
        "rows": rows,
        "validation": validation,
        "max_error_points": max((abs(v["error_points"]) for v in modelled), default=None),
        "notes": notes,
    }
