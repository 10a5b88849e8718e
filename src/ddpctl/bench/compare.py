"""``ddpctl bench compare A.json B.json``: two reports side by side, with B/A ratios. Pure, but for loading."""

from __future__ import annotations

import json
from pathlib import Path

from ddpctl.bench.report import SCHEMA_VERSION
from ddpctl.errors import UsageError


def load_report(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"report not found: {path}", "pass the report.json written by 'ddpctl bench -o DIR'") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path} as JSON ({exc.__class__.__name__})",
                         "pass the report.json written by 'ddpctl bench'") from None
    if not isinstance(data, dict) or "cells" not in data or "schema_version" not in data:
        raise UsageError(f"{path} is not a ddpctl bench report (no schema_version/cells)",
                         "pass the report.json written by 'ddpctl bench'")
    if data["schema_version"] != SCHEMA_VERSION:
        raise UsageError(f"{path} has report schema version {data['schema_version']}, this ddpctl reads "
                         f"{SCHEMA_VERSION}", "compare reports written by the same ddpctl version")
    return data


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
