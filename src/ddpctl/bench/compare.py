"""``ddpctl bench compare A.json B.json``: two reports side by side, with B/A ratios. Pure, but for loading."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ddpctl.bench.plan import PIPELINE_ALIASES
from ddpctl.bench.report import SCHEMA_VERSION
from ddpctl.errors import UsageError

MAX_REPORT_BYTES = 64 * 2**20  # a report.json larger than this is refused unread (ddpctl's are well under 1 MiB)
OPTIONAL_WHEN_READ = ("plots",)  # keys a report written by an older ddpctl of this schema version may lack
_FIX = "pass the report.json written by 'ddpctl bench -o DIR'"


def load_report(path: Path) -> dict:
    r"""report.json read back: at most :data:`MAX_REPORT_BYTES`, strict JSON, valid against report.schema.json
    (one-line error otherwise), then :func:`upgrade`\ d."""
    import math

    from ddpctl.bench.report import schema
    from ddpctl.validate.schema import Validator

    def no_constant(word: str):
        raise ValueError(f"{word} is not JSON")

    if os.path.exists(path) and not os.path.isfile(path):
        raise UsageError(f"report {path} is not a regular file", _FIX)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"report not found: {path}", _FIX) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror or exc.__class__.__name__})", _FIX) from None
    if len(raw) > MAX_REPORT_BYTES:
        raise UsageError(f"{path} is larger than {MAX_REPORT_BYTES // 2**20} MiB, too large for a bench report", _FIX)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"cannot read {path} as JSON ({exc.__class__.__name__})", _FIX) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UsageError(f"{path} is not a ddpctl bench report (no schema_version)", _FIX)
    if data["schema_version"] != SCHEMA_VERSION:
        version = data["schema_version"]
        shown = repr(version)[:40] if isinstance(version, (str, int, float)) and not (
            isinstance(version, int) and abs(version) > 10**40) and not (isinstance(version, float) and not math.isfinite(version)) else "?"
        raise UsageError(f"{path} has report schema version {shown}, this ddpctl reads {SCHEMA_VERSION}",
                         "compare reports written by the same ddpctl version")
    try:
        root = schema()
        root["required"] = [k for k in root.get("required", []) if k not in OPTIONAL_WHEN_READ]
        issues = Validator(root, strict=False).issues(data)
    except RecursionError:
        raise UsageError(f"{path} is nested too deeply for a bench report", _FIX) from None
    if issues:
        first = issues[0]
        where = "/".join(str(p) for p in first.path) or "(top)"
        raise UsageError(f"{path} is not a valid bench report: {where[:80]} {first.message[:120]}"
                         + (f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""), _FIX)
    return upgrade(data)


def upgrade(report: dict) -> dict:
    """A report as this ddpctl writes it. A report may name the device pipeline ``gpu`` (its deprecated
    spelling, ``plan.PIPELINE_ALIASES``) in the cells' pipelines and keys, the options and the
    headline; read, it is ``device``. The measured figures, the command and the prose (diagnosis reasons,
    errors) stay as written. Pure: returns a new dict."""
    def name(p):
        return PIPELINE_ALIASES.get(p, p) if isinstance(p, str) else p

    def key(k):  # workload/pipeline/strategy/gpus[/socket]
        parts = k.split("/") if isinstance(k, str) else []
        return "/".join([parts[0], name(parts[1]), *parts[2:]]) if len(parts) >= 4 else k

    def keys(d, *fields: str):
        if not isinstance(d, dict):
            return d
        return {**d, **{f: (name if f == "pipeline" else key)(d[f]) for f in fields if f in d}}

    out = dict(report)
    out["cells"] = [keys(c, "pipeline", "key", "baseline_key", "classic_key") for c in report["cells"]]
    if isinstance(out.get("options"), dict) and isinstance(out["options"].get("pipelines"), list):
        out["options"] = {**out["options"], "pipelines": [name(p) for p in out["options"]["pipelines"]]}
    head = dict(out.get("headline") or {})
    if "pipeline_speedup_1gpu" in head:  # the device pipeline's img/s was "gpu_pipeline"
        head["pipeline_speedup_1gpu"] = [{("device" if k == "gpu_pipeline" else k): v for k, v in h.items()}
                                         if isinstance(h, dict) else h for h in head["pipeline_speedup_1gpu"]]
    if "vs_classic" in head:
        head["vs_classic"] = [keys(h, "key") for h in head["vs_classic"]]
    if "headline" in out:
        out["headline"] = head
    if "link_advice" in out:
        out["link_advice"] = [keys(a, "key") for a in out["link_advice"]]
    if isinstance(out.get("forecast"), dict):
        fc = dict(out["forecast"])
        fc["workloads"] = [{**keys(w, "baseline_key"), **{f: [key(k) for k in w.get(f, [])]
                                                          for f in ("overhead_from", "overlap_from") if f in w}}
                           for w in fc.get("workloads") or []]
        fc["validation"] = [{**keys(v, "key"), **({"fitted_from": [key(k) for k in v["fitted_from"]]}
                                                  if "fitted_from" in v else {})} for v in fc.get("validation") or []]
        out["forecast"] = fc
    return out


def _ratio(a, b) -> str:
    if a is None or b is None or a == 0:
        return "-"
    return f"{b / a:.2f}x"


def _ips(c: dict | None):
    return c["images_per_sec"]["median"] if c and c.get("ok") and c.get("images_per_sec") else None


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def compare(a: dict, b: dict, *, name_a: str = "A", name_b: str = "B") -> str:
    """Markdown: machines, throughput per cell with B/A, efficiency per cell, all-reduce busbw."""
    ha, hb = a["hardware"], b["hardware"]

    def machine(h: dict) -> str:
        gpus = f"{h['gpu_count']} x {h['gpu_model']}" if h.get("gpu_count") else "CPU only"
        return f"{gpus}, torch {h.get('torch')}, CUDA {h.get('cuda') or '-'}, NCCL {h.get('nccl') or '-'}"

    lines = ["# ddpctl bench compare", "", f"- A = {name_a}: {machine(ha)}, {a['created']}",
             f"- B = {name_b}: {machine(hb)}, {b['created']}", ""]
    ca = {c["key"]: c for c in a["cells"]}
    cb = {c["key"]: c for c in b["cells"]}
    keys = list(ca) + [k for k in cb if k not in ca]
    lines += ["| cell | A img/s | B img/s | B/A | A eff. | B eff. | A batch ms | B batch ms |",
              "|---|---|---|---|---|---|---|---|"]
    for k in keys:
        x, y = ca.get(k), cb.get(k)
        ea = x.get("scaling_efficiency") if x else None
        eb = y.get("scaling_efficiency") if y else None
        sa = x.get("step_time_s") if x else None
        sb = y.get("step_time_s") if y else None
        lines.append(f"| {k} | {_f(_ips(x), ',.0f')} | {_f(_ips(y), ',.0f')} | {_ratio(_ips(x), _ips(y))} | "
                     f"{_f(ea, '.1%')} | {_f(eb, '.1%')} | {_f(sa and sa * 1e3, '.1f')} | "
                     f"{_f(sb and sb * 1e3, '.1f')} |")
    # one probe per (world size, link): older reports have no link (the host's own, "local")
    pa = {(p["world_size"], p.get("link", "local")): p for p in a.get("interconnect", []) if p.get("results")}
    pb = {(p["world_size"], p.get("link", "local")): p for p in b.get("interconnect", []) if p.get("results")}
    if pa or pb:
        lines += ["", "| all-reduce | A busbw GB/s | B busbw GB/s | B/A |", "|---|---|---|---|"]
        for n, link in sorted(set(pa) | set(pb)):
            va = pa[(n, link)]["busbw_at_max_gbps"] if (n, link) in pa else None
            vb = pb[(n, link)]["busbw_at_max_gbps"] if (n, link) in pb else None
            where = "" if link == "local" else f" ({link})"
            lines.append(f"| x{n}{where} at max size | {_f(va, '.2f')} | {_f(vb, '.2f')} | {_ratio(va, vb)} |")
    only_a = [k for k in ca if k not in cb]
    only_b = [k for k in cb if k not in ca]
    if only_a or only_b:
        lines += ["", f"- cells only in A: {', '.join(only_a) or 'none'}; only in B: {', '.join(only_b) or 'none'}"]
    return "\n".join(lines) + "\n"
