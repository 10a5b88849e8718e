"""From measurements to the report: ``build_report`` (pure: a dict, report.json's content) and
``render_markdown`` (pure: report.md's text, in :mod:`ddpctl.bench.markdown`). Writing files happens in
:func:`write_report` only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ddpctl import __version__
from ddpctl.bench import efficiency as eff
from ddpctl.bench import forecast, links
from ddpctl.bench.markdown import render_markdown
from ddpctl.bench.plan import PIPELINES, STRATEGIES, WORKLOADS, Cell, cell_key, nodes_of
from ddpctl.bench.runner import BenchRun

SCHEMA_VERSION = 1
GRAD_BYTES_PER_PARAM = links.GRAD_BYTES_PER_PARAM


# ------------------------------------------------------------------------------------ build (pure)


def _num(d: dict | None, key: str) -> float | None:
    v = (d or {}).get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _stats(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": eff.median(values), "min": min(values), "max": max(values), "spread": eff.spread(values),
            "n": len(values)}


def _global_batch(cell: Cell) -> int:
    return cell.batch_size * (1 if cell.strategy == "single" else cell.gpus)


def _cell_entry(cell: Cell, runs: list) -> dict:
    good = [r for r in runs if r.error is None]
    ips = [float(r.summary["images_per_sec"]) for r in good]
    steps = []
    for r in good:
        st = _num(r.summary, "step_time_s")
        gb = _num(r.summary, "global_batch") or _global_batch(cell)
        steps.append(st if st and st > 0 else gb / float(r.summary["images_per_sec"]))
    # Epoch time in steady state: steps per epoch x measured batch time (a completed first epoch would also
    # count the warm-up steps). Without the program's steps per epoch: its own epoch time, else dataset / img/s.
    epochs, estimated = [], False
    for r, st in zip(good, steps, strict=True):
        spe = _num(r.summary, "steps_per_epoch")
        et = _num(r.summary, "epoch_time_s")
        if spe:
            et = spe * st
        elif et is None or et <= 0:
            et, estimated = WORKLOADS[cell.workload].dataset_size / float(r.summary["images_per_sec"]), True
        epochs.append(et)
    last = good[-1].summary if good else None
    # 'params': the one spelling ddp-train's summary line has (src/ddp_train/summary.schema.json)
    params = int(_num(last, "params") or 0) or WORKLOADS[cell.workload].param_count
    data_fracs = [_num(r.summary, "data_time_s") / s for r, s in zip(good, steps, strict=True) if _num(r.summary, "data_time_s")]
    util = [_num(r.summary, "gpu_util") for r in good if _num(r.summary, "gpu_util") is not None]
    mem = [_num(r.summary, "gpu_mem_gb") for r in good if _num(r.summary, "gpu_mem_gb") is not None]
    syncs = sorted({str(r.summary.get("sync_check")) for r in good if r.summary.get("sync_check") is not None})
    startups = [_num(r.summary, "startup_s") for r in good if _num(r.summary, "startup_s") is not None]
    link = [v for v in (links.startup_link_gbps(r.summary) for r in good) if v is not None]
    modes = sorted({(str(r.summary.get("step_mode")) + ("+compile" if r.summary.get("compile") else ""))
                    for r in good if r.summary.get("step_mode")})
    return {
        "key": cell.key,
        "workload": cell.workload,
        "model": _model(cell),
        "pipeline": cell.pipeline,
        "strategy": cell.strategy,
        "gpus": cell.gpus,
        "link": cell.link,
        "nodes": cell.nodes,
        "batch_size_per_gpu": cell.batch_size,
        "global_batch": int(_num(last, "global_batch") or _global_batch(cell)),
        "warmup_steps": cell.warmup,
        "timed_steps": cell.steps,
        "ok": bool(good),
        "runs": [{
            "repeat": r.repeat,
            "ok": r.error is None,
            "skipped": bool(r.error and r.error.startswith("skipped:")),  # cut by --time-budget: not a failure
            "returncode": r.result.returncode,
            "wall_s": round(r.result.seconds, 3),
            "images_per_sec": _num(r.summary, "images_per_sec") if r.error is None else None,
            "step_time_s": _num(r.summary, "step_time_s"),
            "epoch_time_s": _num(r.summary, "epoch_time_s"),
            "gpu_util": _num(r.summary, "gpu_util"),
            "gpu_mem_gb": _num(r.summary, "gpu_mem_gb"),
            "sync_check": (r.summary or {}).get("sync_check"),
            "link_busbw_gbps": links.startup_link_gbps(r.summary) if r.error is None else None,
            "error": r.error,
        } for r in runs],
        "images_per_sec": _stats(ips),
        "step_time_s": eff.median(steps) if steps else None,
        "epoch_time_s": eff.median(epochs) if epochs else None,
        "epoch_time_estimated": estimated,
        "gpu_util": eff.median(util) if util else None,
        "gpu_mem_gb": max(mem) if mem else None,
        "sync_check": "/".join(syncs) if syncs else None,
        "step_mode": "/".join(modes) if modes else None,
        "startup_s": eff.median(startups) if startups else None,
        "link_busbw_gbps": eff.median(link) if link else None,
        "param_count": params,
        "data_fraction": eff.median(data_fracs) if data_fracs else None,
        "baseline_key": None,
        "speedup": None,
        "scaling_efficiency": None,
        "interconnect": None,
        "diagnosis": None,
        "classic_key": None,
        "vs_classic": None,
        "summary": last,
    }


def _model(cell: Cell) -> str:
    w = WORKLOADS[cell.workload]
    if cell.pipeline == "classic" and w.classic_model:
        return w.classic_model
    return w.model or cell.workload


def build_report(bench: BenchRun, *, hardware_host: dict, options: dict, command: str, created: str,
                 runtime: str) -> dict:
    plan = bench.plan
    by_cell: dict[str, list] = {}
    for r in bench.runs:
        by_cell.setdefault(r.cell.key, []).append(r)
    # Reading order (the run order puts DataParallel last): workload, pipeline, single/dp/ddp, GPU count.
    workloads = list(dict.fromkeys(c.workload for c in plan.cells))
    ordered = sorted(plan.cells, key=lambda c: (workloads.index(c.workload), PIPELINES.index(c.pipeline),
                                                STRATEGIES.index(c.strategy), c.gpus))
    cells = [_cell_entry(c, by_cell.get(c.key, [])) for c in ordered]
    index = {c["key"]: c for c in cells}

    def ips(c: dict | None) -> float | None:
        return c["images_per_sec"]["median"] if c and c["ok"] else None

    def classic_of(c: dict) -> dict | None:
        for strat in (("ddp",) if c["gpus"] > 1 else ("single", "ddp")):
            cand = index.get(f"{c['workload']}/classic/{strat}/{c['gpus']}")
            if ips(cand):
                return cand
        return None

    for c in cells:
        if not c["ok"]:
            continue
        # The baseline is the FASTEST 1-GPU configuration of the workload (any pipeline, any strategy), never a
        # slowed one; the classic (reference pipeline) cells, a different program, scale against their own 1-GPU run.
        ones = [x for x in cells if x["workload"] == c["workload"] and x["gpus"] == 1 and ips(x)
                and (x["pipeline"] == "classic") == (c["pipeline"] == "classic")]
        base = max(ones, key=ips) if ones else None
        if c["pipeline"] != "classic":
            cl = classic_of(c)
            if cl is not None:
                c["classic_key"] = cl["key"]
                c["vs_classic"] = ips(c) / ips(cl)
        if base is not None:
            c["baseline_key"] = base["key"]
            c["speedup"] = eff.speedup(ips(c), ips(base))
            c["scaling_efficiency"] = eff.scaling_efficiency(ips(c), ips(base), c["gpus"])
        if c["strategy"] != "ddp" or c["gpus"] < 2 or base is None:
            continue
        probe = links.probe_for(bench, c["gpus"], c["link"], nodes_of(c))
        t_comm = None
        if probe and c["param_count"]:
            c["interconnect"] = links.bound(c["param_count"], c["summary"], c["gpus"], probe, base["step_time_s"])
            t_comm = c["interconnect"]["t_comm_lb_s"]
        faster = None
        if c["pipeline"] != "device":
            sib = index.get(cell_key(c["workload"], "device", c["strategy"], c["gpus"], c["link"], nodes_of(c)))
            if ips(sib):
                faster = ips(sib) / ips(c)
        d = eff.diagnose(n=c["gpus"], efficiency=c["scaling_efficiency"], step_time=c["step_time_s"],
                         baseline_step_time=base["step_time_s"], t_comm=t_comm, faster_pipeline_ratio=faster,
                         data_fraction=c["data_fraction"])
        c["diagnosis"] = {"label": d.label, "reason": d.reason}

    interconnect = links.interconnect_entries(bench)

    out = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ddpctl bench", "version": __version__},
        "created": created,
        "command": command,
        "runtime": runtime,
        "duration_s": round(bench.seconds, 1),
        "options": options,
        "hardware": _hardware(bench.sysinfo, hardware_host),
        "plan": {"device": plan.device, "gpu_counts": list(plan.gpu_counts), "repeat": plan.repeat,
                 "cells": len(plan.cells), "skipped": list(plan.skipped)},
        "interconnect": interconnect,
        "cells": cells,
        "headline": _headline(cells, interconnect),
        "link_advice": links.advice(cells, interconnect),
    }
    out["forecast"] = forecast.forecast(out)
    return out


def _hardware(sysinfo: dict, smi: dict) -> dict:
    gpus = sysinfo.get("gpus") or []
    return {
        "gpu_model": gpus[0]["name"] if gpus else None,
        "gpu_count": sysinfo.get("gpu_count", 0),
        "gpu_memory_gb": gpus[0]["memory_gb"] if gpus else None,
        "driver": smi.get("driver"),
        "cuda": sysinfo.get("cuda"),
        "cudnn": sysinfo.get("cudnn"),
        "nccl": sysinfo.get("nccl"),
        "torch": sysinfo.get("torch"),
        "python": sysinfo.get("python"),
        "cpu_count": sysinfo.get("cpu_count"),
        "cpu_model": sysinfo.get("cpu_model"),
        "hostname": sysinfo.get("hostname"),
        "platform": sysinfo.get("platform"),
        "topology": smi.get("topology"),
        "gpus": gpus,
        "nvidia_smi": bool(smi.get("present")),
    }


def _headline(cells: list[dict], interconnect: list[dict]) -> dict:
    out: dict = {"ddp_scaling": [], "pipeline_speedup_1gpu": [], "vs_classic": [], "busbw_at_max_gbps": []}
    for c in cells:
        if c["strategy"] == "ddp" and c["gpus"] >= 2 and c["pipeline"] == "device" and c["scaling_efficiency"]:
            out["ddp_scaling"].append({"workload": c["workload"], "gpus": c["gpus"], "link": c["link"],
                                       "nodes": nodes_of(c),
                                       "scaling_efficiency": c["scaling_efficiency"],
                                       "images_per_sec": c["images_per_sec"]["median"]})
    idx = {c["key"]: c for c in cells if c["ok"]}
    for c in cells:
        if c["pipeline"] == "device" and c["strategy"] == "single" and c["ok"]:
            dl = idx.get(f"{c['workload']}/dataloader/single/1")
            if dl:
                out["pipeline_speedup_1gpu"].append({
                    "workload": c["workload"], "device": c["images_per_sec"]["median"],
                    "dataloader": dl["images_per_sec"]["median"],
                    "ratio": c["images_per_sec"]["median"] / dl["images_per_sec"]["median"]})
    # x times the classic pipeline: the fastest ddp-train configuration at each GPU count against the classic
    # (reference pipeline) cell at the same count
    best: dict = {}
    for c in cells:
        if c["ok"] and c["vs_classic"] is not None:
            k = (c["workload"], c["gpus"])
            if k not in best or c["images_per_sec"]["median"] > best[k]["images_per_sec"]["median"]:
                best[k] = c
    for (w, n), c in sorted(best.items(), key=lambda kv: (list(dict.fromkeys(x["workload"] for x in cells)).index(kv[0][0]), kv[0][1])):
        cl = idx[c["classic_key"]]
        out["vs_classic"].append({"workload": w, "gpus": n, "key": c["key"], "images_per_sec": c["images_per_sec"]["median"],
                                  "classic_images_per_sec": cl["images_per_sec"]["median"], "ratio": c["vs_classic"]})
    for p in interconnect:
        if p.get("ok") and p.get("results"):
            out["busbw_at_max_gbps"].append({"world_size": p["world_size"], "link": p["link"], "bytes": p["max_bytes"],
                                             "busbw_gbps": p["busbw_at_max_gbps"]})
    return out


def write_report(report: dict, outdir: Path, *, plots: bool = True) -> list[Path]:
    """report.json, the PNGs (when matplotlib is there) and report.md into ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    made: list[str] = []
    if plots:
        from ddpctl.bench import plots as plotmod

        made = plotmod.make_plots(report, outdir)
    report["plots"] = made
    from ddpctl.outfiles import write_files  # regular files only, replaced atomically, both or neither

    write_files({outdir / "report.json": json.dumps(report, indent=2) + "\n",
                 outdir / "report.md": render_markdown(report, made)})
    written += [outdir / "report.json", outdir / "report.md"]
    written += [outdir / p for p in made]
    return written


def schema() -> dict:
    """The JSON Schema of report.json (shipped as package data, ``ddpctl/bench/report.schema.json``)."""
    from importlib.resources import files

    return json.loads(files("ddpctl.bench").joinpath("report.schema.json").read_text(encoding="utf-8"))
