"""report.md from a report (the dict :func:`ddpctl.bench.report.build_report` makes): pure, text only."""

from __future__ import annotations

from ddpctl.bench.plan import nodes_of
from ddpctl.joboutput.visible import visible


def _f(v, fmt: str, none: str = "-") -> str:
    return none if v is None else format(v, fmt)


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _over_sockets(c: dict) -> str:
    return f" ({nodes_of(c)} nodes, sockets)" if c.get("link") == "socket" else ""


def _strat(c: dict) -> str:
    return c["strategy"] + _over_sockets(c)


def _link(p: dict) -> str:
    return {"socket": ", 2 nodes over sockets (ddpctl's NCCL socket settings)",
            "socket-nccl-defaults": ", 2 nodes over sockets (NCCL's socket defaults)"}.get(p.get("link", "local"), "")


PLOTS = (("throughput_vs_gpus.png", "Throughput vs GPUs (dashed: ideal N x 1-GPU)"),
         ("efficiency_vs_gpus.png", "Scaling efficiency vs GPUs, with the interconnect's bounds"),
         ("strategies.png", "Strategies side by side"),
         ("forecast.png", "Scaling forecast: N nodes x 8 GPUs over the named links, with the validated cells"))


def _text(value, *, code: bool = False) -> str:
    """A command line (``code``: in a code span) or an error in report.md: what a run printed may be in it, so the
    unprintable is escaped, no backtick ends a code span, and outside one no ``<!--`` hides the rest."""
    text = visible(value).replace("`", "'")
    return text if code else text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _runs(v: dict) -> str:
    """A validated cell's runs, lowest to highest, where it has two or more (absent in older reports)."""
    r = v.get("measured_range")
    return f" ({100 * r[0]:.1f}-{100 * r[1]:.1f})" if r else ""


def _source_of(call: dict, report: dict) -> str:
    """A resumed call's code, where it recorded it: said only when it is not the first call's."""
    mine, first = call.get("source"), report.get("source")
    if not mine or mine == first:
        return ""
    return f" (source {mine}: other code than the first call's)" if first else f" (source {mine})"


def render_markdown(report: dict, plots: list[str] | tuple[str, ...] = ()) -> str:
    hw = report["hardware"]
    dev = report["plan"]["device"]
    unit = "GPUs" if dev == "cuda" else "procs"
    lines = ["# ddpctl bench report", "",
             f"- created: {report['created']} ({report['duration_s']:.0f} s), runtime: {report['runtime']}, "
             f"ddpctl {report['tool']['version']}" + (f" (source {report['source']})" if report.get("source") else ""),
             f"- command: `{_text(report['command'], code=True)}`",
             f"- matrix: {report['plan']['cells']} cells x {report['plan']['repeat']} repeat(s) on "
             f"{', '.join(map(str, report['plan']['gpu_counts']))} {unit}; figures are medians of the repeats",
             *([f"- resumed (`--resume`): {len(report['resumed'])} more call(s), "
                + "; ".join(f"{c['created']}, {c['runs']} run(s) in {c['duration_s']:.0f} s" + _source_of(c, report)
                            for c in report["resumed"])]
               if report.get("resumed") else []),
             *([f"- rebuilt (`ddpctl bench rebuild`): {report['rebuilt']['created']}, the analysis of ddpctl source "
                f"{report['rebuilt']['source']}"] if report.get("rebuilt") else []),
             ""]
    lines += ["## Hardware", ""]
    gpu = (f"{hw['gpu_count']} x {hw['gpu_model']} ({hw['gpu_memory_gb']} GB)" if hw["gpu_count"]
           else "none (CPU only: 'GPUs' below are gloo processes)")
    lines += _table(["item", "value"], [
        ["GPUs", gpu], ["driver", hw["driver"] or "-"], ["CUDA (torch build)", hw["cuda"] or "-"],
        ["cuDNN", hw["cudnn"] or "-"], ["NCCL", hw["nccl"] or "-"], ["torch", hw["torch"] or "-"],
        ["python", hw["python"] or "-"], ["CPUs", f"{hw['cpu_count']} ({hw['cpu_model'] or '?'})"],
        ["host", hw["hostname"] or "-"],
    ])
    if hw.get("topology"):
        from ddpctl.host_gpus import strip_ansi

        lines += ["", "GPU topology (`nvidia-smi topo -m`):", "", "```", strip_ansi(hw["topology"]), "```"]
    lines += [""]

    head = report["headline"]
    lines += ["## Headline", ""]
    hl = []
    for h in head["ddp_scaling"]:
        hl.append(f"- DDP scaling efficiency, {h['workload']} on {h['gpus']} {unit}"
                  f"{f' ({nodes_of(h)} nodes over sockets)' if h.get('link') == 'socket' else ''}: "
                  f"**{h['scaling_efficiency']:.1%}** "
                  f"({h['images_per_sec']:,.0f} img/s)")
    for h in head["pipeline_speedup_1gpu"]:
        hl.append(f"- device pipeline (data on the GPU) vs DataLoader, {h['workload']}, 1 {unit[:-1]}: "
                  f"**{h['ratio']:.2f}x** ({h['device']:,.0f} vs {h['dataloader']:,.0f} img/s)")
    for h in head.get("vs_classic", []):
        hl.append(f"- ddp-train vs the classic pipeline, {h['workload']}, {h['gpus']} {unit if h['gpus'] > 1 else unit[:-1]}: "
                  f"**{h['ratio']:.1f}x** ({h['images_per_sec']:,.0f} img/s, `{h['key']}`, vs classic "
                  f"{h['classic_images_per_sec']:,.0f})")
    for h in head["busbw_at_max_gbps"]:
        hl.append(f"- all-reduce bus bandwidth, {h['world_size']} {unit}{_link(h)}, {_size(h['bytes'])}: "
                  f"**{h['busbw_gbps']:.1f} GB/s**")
    lines += (hl or ["- (no headline figure: see the failures below)"]) + [""]

    # A report with the classic comparison (vs_classic) also has the step mode; one without renders without both.
    v2 = any("vs_classic" in c for c in report["cells"])
    lines += ["## Results", ""]
    if not v2:
        lines += ["img/s is global (all GPUs); batch time is one optimizer step; epoch time is steps per epoch x "
                  "batch time (steady state; dataset size / img/s where marked `~`); speedup and efficiency are "
                  "against the 1-GPU run of the same workload and pipeline (`single`).", ""]
    else:
        lines += [
              "img/s is global (all GPUs); batch time is one optimizer step; epoch time is steps per epoch x "
              "batch time (steady state; dataset size / img/s where marked `~`); speedup and efficiency are "
              "against the fastest 1-GPU configuration of the workload (the classic cells: against their own 1-GPU "
              "run); x classic is img/s over the classic (reference pipeline) cell at the same GPU count; mode is "
              "ddp-train's step mode (graph: the whole step in one CUDA graph); start-up is the seconds to the "
              "first captured step.", ""]
    rows = []
    for c in report["cells"]:
        ips = c["images_per_sec"]
        rows.append([
            c["workload"], c["pipeline"], _strat(c), str(c["gpus"]), f"{c['batch_size_per_gpu']}/{c['global_batch']}",
            (f"{ips['median']:,.0f}" + (f" ±{ips['spread'] / 2:.1%}" if ips["n"] > 1 else "")) if ips else
            ("skipped" if c["runs"] and all(r.get("skipped") for r in c["runs"]) else "FAILED"),
            _f(None if c["step_time_s"] is None else c["step_time_s"] * 1e3, ".1f"),
            ("~" if c["epoch_time_estimated"] else "") + _f(c["epoch_time_s"], ".1f"),
            _f(c["speedup"], ".2f"), _pct(c["scaling_efficiency"]),
            *([_f(c.get("vs_classic"), ".1f")] if v2 else []),
            _f(c["gpu_util"], ".0f"), _f(c["gpu_mem_gb"], ".1f"), c["sync_check"] or "-",
            *([c.get("step_mode") or "-", _f(c.get("startup_s"), ".1f")] if v2 else []),
        ])
    lines += _table(["workload", "pipeline", "strategy", unit, "batch/GPU / global", "img/s", "batch time ms",
                     "epoch s", "speedup", "scaling eff.", *(["x classic"] if v2 else []), "GPU util %",
                     "GPU mem GiB", "sync", *(["mode", "start-up s"] if v2 else [])], rows)
    lines += [""]

    lines += ["## Scaling against the interconnect", "",
              "For each DDP cell: the measured scaling efficiency next to what the measured all-reduce bandwidth "
              "allows. t_compute is the 1-GPU batch time; t_comm >= 2(N-1)/N x gradient bytes / busbw (peak "
              "busbw of the probe, fp32 gradients); bounds: no overlap t_c/(t_c+t_comm), full overlap "
              "t_c/max(t_c,t_comm). DDP overlaps buckets with backward, so the truth lies between them. "
              "Predicted at start-up: what ddp-train's communication plan said it would reach in its first line "
              "(its own link measurement and step compute time; docs/ddp-train.md).", ""]
    rows = []
    for c in report["cells"]:
        if c["strategy"] != "ddp" or c["gpus"] < 2:
            continue
        ic = c["interconnect"] or {}
        rows.append([
            c["workload"], c["pipeline"] + _over_sockets(c), str(c["gpus"]),
            _pct(c["scaling_efficiency"]), _pct((c.get("summary") or {}).get("predicted_efficiency")),
            _pct(ic.get("eff_no_overlap")), _pct(ic.get("eff_full_overlap")),
            _f(ic.get("grad_bytes") and ic["grad_bytes"] / 1e6, ".1f"), _f(ic.get("busbw_gbps"), ".1f"),
            _f(ic.get("t_compute_s") and ic["t_compute_s"] * 1e3, ".2f"),
            _f(None if ic.get("t_comm_lb_s") is None else ic["t_comm_lb_s"] * 1e3, ".3f"),
            (f"**{c['diagnosis']['label']}**: {c['diagnosis']['reason']}" if c["diagnosis"] else "-"),
        ])
    lines += _table(["workload", "pipeline", unit, "measured eff.", "predicted at start-up", "allowed (no overlap)",
                     "allowed (full overlap)",
                     "grad MB", "busbw GB/s", "t_compute ms", "t_comm >= ms", "diagnosis"], rows) if rows else \
        ["(no DDP cell on 2 or more GPUs in this matrix)"]
    lines += [""]

    lines += ["## Interconnect (all-reduce probe)", "",
              "nccl-tests definitions: algbw = bytes / time, busbw = algbw x 2(N-1)/N; 1 GB = 1e9 bytes; "
              "in-place sum, slowest rank's mean time.", ""]
    if not report["interconnect"]:
        lines += ["(not run: no DDP cell on 2 or more GPUs)", ""]
    for p in report["interconnect"]:
        if not p["ok"] and not p.get("results"):
            lines += [f"- {p['world_size']} {unit}{_link(p)}: "
                      f"{'' if str(p['error']).startswith('skipped') else 'FAILED '}({_text(p['error'])})", ""]
            continue
        lines += [f"{p['world_size']} {unit}{_link(p)}, {p['backend']}, {p['dtype']}"
                  f"{'' if p['ok'] else ' (WRONG SUMS)'}:", ""]
        lines += _table(["size", "time us", "algbw GB/s", "busbw GB/s"], [
            [_size(r["bytes"]), f"{r['time_us']:.1f}", f"{r['algbw_gbps']:.2f}", f"{r['busbw_gbps']:.2f}"]
            for r in p["results"]])
        lines += [""]

    advice = report.get("link_advice") or []
    if advice:
        lines += ["## Link-bound cells: what would gain", "",
                  "The socket cells (the two-node emulation) and the local cells diagnosed communication-bound; "
                  "each gain with the bound that says how much it can give at most.", ""]
        for a in advice:
            lines += [f"- `{a['key']}` ({a['diagnosis']}, {_pct(a['scaling_efficiency'])}):"]
            lines += [f"  - {g}" for g in a["gains"]]
        lines += [""]
    if report.get("forecast"):
        lines += render_forecast(report["forecast"], unit)
    failures = [(c, r) for c in report["cells"] for r in c["runs"] if not r["ok"] and not r.get("skipped")]
    cut = [(c, r) for c in report["cells"] for r in c["runs"] if r.get("skipped")]
    if failures or cut or report["plan"]["skipped"]:
        lines += ["## Failures and gaps", ""]
        lines += [f"- {c['key']} repeat {r['repeat']}: {_text(r['error'])}" for c, r in failures]
        lines += [f"- {c['key']} repeat {r['repeat']}: {_text(r['error'])}" for c, r in cut]
        lines += [f"- skipped: {s}" for s in report["plan"]["skipped"]]
        lines += [""]
    if plots:
        lines += ["## Plots", ""]
        titles = dict(PLOTS)
        lines += [f"![{titles.get(p, p)}]({p})" for p in plots] + [""]
    return "\n".join(lines)


def _plan(plan: dict) -> str:
    comp = "fp32" if plan["grad_compression"] == "none" else plan["grad_compression"]
    return f"{comp}, {plan['reducer']}" + (f" {plan['bucket_mb']:g} MB" if plan["reducer"] != "flat" else "")


def render_forecast(fc: dict, unit: str = "GPUs") -> list[str]:
    """The report's "Scaling forecast" section (also what ``ddpctl bench forecast`` prints)."""
    lines = ["## Scaling forecast", "",
             "Predicted scaling efficiency (and img/s) for N nodes x G GPUs over a named link, from this report's "
             "cells and probes (docs/bench.md, \"The scaling forecast\"): t_step = t_1 + o + the all-reduce time not "
             "hidden behind the backward; the all-reduce is hierarchical (the in-node probe's latency + bandwidth "
             "fit, then the link between nodes), with the communication plan ddp-train's `auto` picks for that "
             "link (flat after the backward, or in buckets during it; fp32 or bf16).", ""]
    lines += [] if not fc["workloads"] else _table(
        ["workload", "t_1 ms (1 GPU)", "o ms (distributed overhead)", "f (overlap fraction, buckets)", "fitted from"], [
        [w["workload"], f"{w['t_1_s'] * 1e3:.2f}", f"{w['overhead_s'] * 1e3:.3f}", f"{w['overlap']:.2f}",
         ", ".join(dict.fromkeys(w["overhead_from"] + w["overlap_from"])) or "no multi-GPU cell (o = f = 0)"]
        for w in fc["workloads"]])
    lines += ["", "Links between nodes: " + "; ".join(f"`{x['name']}` {x['description']}" for x in fc["links"]) + ".",
              ""]
    fits = fc.get("local_fits") or []
    if fits:
        lines += ["In-node all-reduce fits (t = alpha + 2(n-1)/n x bytes / busbw): " + "; ".join(
            f"{f['world_size']} {unit}: alpha {f['alpha_us']:.0f} us, busbw {f['busbw_gbps']:.0f} GB/s "
            f"(worst point {f['worst_error']:.0%} off)" for f in fits) + ".", ""]
    val = fc.get("validation") or []
    if val:
        lines += ["### Validation: each measured multi-GPU cell, forecast without it", ""]
        modelled = [v for v in val if v["modelled"]]
        if modelled:
            lines += _table(["cell", "plan", "t_comm ms", "forecast eff.", "measured eff. (runs)", "error (points)",
                             "forecast img/s", "measured img/s", "o, f from"], [
                [f"`{v['key']}`", _plan(v["plan"]), f"{v['t_comm_s'] * 1e3:.3f}", _pct(v["forecast_efficiency"]),
                 _pct(v["measured_efficiency"]) + _runs(v), _f(v["error_points"], "+.1f"),
                 f"{v['forecast_images_per_sec']:,.0f}", _f(v["measured_images_per_sec"], ",.0f"),
                 ", ".join(v["fitted_from"]) or "none (o = f = 0)"] for v in modelled])
            if fc.get("max_error_points") is not None:
                scored = [v for v in modelled if v["error_points"] is not None]
                close = [v for v in scored if abs(v["error_points"]) <= 3]
                noisy = [v for v in scored if abs(v["error_points"]) > 3 and v.get("within_runs")]
                lines += ["", f"Largest miss: **{fc['max_error_points']:.1f} points** of scaling efficiency; "
                          f"{len(close)} of {len(scored)} cells within 3 points"
                          + (f", {len(noisy)} more inside the spread of their own runs" if noisy else "") + "."]
        lines += [f"- `{v['key']}`: not modelled ({v['reason']})" for v in val if not v["modelled"]]
        lines += [""]
    for w in fc["workloads"]:
        rows = [r for r in fc["rows"] if r["workload"] == w["workload"]]
        configs = list(dict.fromkeys((r["nodes"], r["gpus_per_node"]) for r in rows))
        links = list(dict.fromkeys(r["link"] for r in rows if r["nodes"] > 1))
        single = {(r["nodes"], r["gpus_per_node"]): r for r in rows if r["nodes"] == 1}
        by = {(r["link"], r["nodes"], r["gpus_per_node"]): r for r in rows}

        def cell(r):
            return "-" if r is None else f"{r['scaling_efficiency']:.1%} ({r['images_per_sec']:,.0f})"
        lines += [f"### {w['workload']}: forecast scaling efficiency (img/s)", ""]
        table = []
        if single:
            table.append(["one node"] + [cell(single.get(k)) if k[0] == 1 else "" for k in configs])
        for link in links:
            table.append([f"`{link}`"] + [cell(by.get((link, n, g))) if n > 1 else "" for n, g in configs])
        lines += _table(["link"] + [f"{n} x {g}" for n, g in configs], table)
        if links:
            said = []
            for link in links:
                mine = {(r["nodes"], r["gpus_per_node"]): _plan(r["plan"]) for r in rows if r["link"] == link}
                kinds = list(dict.fromkeys(mine.values()))
                said.append(f"`{link}` " + (kinds[0] if len(kinds) == 1 else ", ".join(
                    f"{p} ({' '.join(f'{n}x{g}' for (n, g), q in mine.items() if q == p)})" for p in kinds)))
            lines += ["", "Communication plan (`auto`): " + "; ".join(said) + "."]
        lines += [""]
    lines += [f"- {n}" for n in fc.get("notes") or []]
    return lines + ([""] if fc.get("notes") else [])


# ------------------------------------------------------------------------------------- the edge
