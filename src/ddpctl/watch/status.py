"""``ddpctl status``: a job's nodes (state, restarts, exit codes, age of the last output line) and its ranks'
progress (step / total, %, samples/s, loss, ETA, the slowest rank, the last checkpoint), as a dict (``--json``)
and as text. Pure: the inputs come from :mod:`ddpctl.watch.sources`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpctl.joboutput import records as rec_mod
from ddpctl.joboutput import tensorboard
from ddpctl.joboutput.visible import visible


@dataclass
class NodeView:
    node: int
    state: str
    exit_code: int | None = None
    restarts: int = 0
    container: str = ""
    host: str = ""
    last_output: float | None = None  # Unix time of its newest output line


@dataclass
class JobView:
    job: str
    source: str  # docker | kept | slurm | files
    nodes: list[NodeView] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # every output line of every attempt, rank prefixes kept
    restarts: int = 0
    state: str = ""
    result: str | None = None
    kept: str | None = None  # the folder its output is kept in
    tensorboard: dict | None = None  # where its TensorBoard event files are (ddpctl.joboutput.tensorboard)
    notes: list[str] = field(default_factory=list)  # what a bounded read left out (ddpctl.joboutput.reading)


def build(view: JobView, now: float) -> dict:
    """The status dict (``status --json``): plain data, every float finite (strict JSON)."""
    found = rec_mod.collect_all(view.lines)
    ranks, summary = found.ranks, found.summary
    rows = [rp.to_dict(now) for rp in sorted(ranks.values(), key=lambda r: r.rank)]
    slow = rec_mod.slowest(rows)
    for r in rows:
        r["slowest"] = r["rank"] == slow
    prog = rec_mod.job_progress(ranks, now)
    nodes = [{"node": n.node, "state": n.state, "exit_code": n.exit_code, "restarts": n.restarts,
              "container": n.container, "host": n.host or None,
              "last_output_age_s": None if n.last_output is None else round(max(0.0, now - n.last_output), 1)}
             for n in sorted(view.nodes, key=lambda n: n.node)]
    state = view.state or _state(view.nodes)
    result = view.result
    if result is None and state != "running" and view.nodes:
        codes = [n.exit_code for n in view.nodes]
        result = "succeeded" if all(c == 0 for c in codes) else "failed"
    if summary is not None and prog is not None and result == "succeeded":
        prog["eta_s"] = 0.0
    notes = list(view.notes) + ([found.note()] if found.rejected else [])
    return rec_mod.json_safe({"job": view.job, "source": view.source, "state": state, "result": result,
                              "restarts": view.restarts, "nodes": nodes, "ranks": rows, "progress": prog,
                              "records_seen": bool(rows), "records_rejected": found.rejected, "summary": summary,
                              "kept": view.kept, "tensorboard": view.tensorboard, "notes": notes})


def _state(nodes: list[NodeView]) -> str:
    states = {n.state for n in nodes}
    if not states:
        return "unknown"
    if states & {"running", "restarting", "created"}:
        return "running"
    return "exited" if len(states) == 1 else "/".join(sorted(states))


def _fmt(v, spec: str = "", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def text(st: dict) -> list[str]:
    """The status as lines: a job line, the node table, the rank table (or why there is none), then what the
    read left out. Every character a job chose is shown as printable text (:mod:`ddpctl.joboutput.visible`)."""
    return [visible(line) for line in _text(st) + list(st.get("notes") or [])]


def _text(st: dict) -> list[str]:
    p = st["progress"]
    head = f"job {st['job']}: {st['state']}"
    if st["result"]:
        head += f", {st['result']}"
    head += f", {st['restarts']} restart(s)"
    if st["kept"]:
        head += f" (kept output: {st['kept']})"
    out = [head]
    if p:
        ck = p["checkpoint"]
        total = f"/{p['total']}" if p["total"] else ""
        pct = f" ({p['percent']:.1f}%)" if p["percent"] is not None else ""
        out.append(f"progress: step {p['step']}{total}{pct}, {_fmt(p['samples_per_sec'], ',.1f')} samples/s, "
                   f"loss {_fmt(p['loss'], '.4f')}, ETA {rec_mod.format_eta(p['eta_s'])}, last checkpoint "
                   + (f"step {ck['step']}" + (f" ({ck['path']})" if ck.get("path") else "") if ck else "none"))
    s = st["summary"]
    if s:
        out.append(f"summary: {s.get('steps')} steps, {_fmt(s.get('images_per_sec'), ',.1f')} samples/s, "
                   f"final accuracy {_fmt(s.get('final_accuracy'), '.4f')}, sync check {s.get('sync_check', '-')}, "
                   f"exit code {s.get('exit_code', '-')}")
    if st.get("tensorboard"):
        out.append(tensorboard.describe(st["tensorboard"], st["job"]))
    table = [("NODE", "STATE", "EXIT", "RESTARTS", "LAST OUTPUT", "CONTAINER") + (("HOST",) if any(
        n["host"] for n in st["nodes"]) else ())]
    for n in st["nodes"]:
        age = n["last_output_age_s"]
        table.append((str(n["node"]), n["state"], _fmt(n["exit_code"], "", ""), str(n["restarts"]),
                      "-" if age is None else rec_mod.format_eta(age) + " ago", n["container"])
                     + ((n["host"] or "",) if len(table[0]) == 7 else ()))
    if st["nodes"]:
        out += _table(table)
    if not st["ranks"]:
        out.append("no progress records seen (the program writes none: see 'watching a job' in the README for "
                   "ddp_train.progress.report)")
        return out
    rt = [("RANK", "NODE", "STEP", "%", "SAMPLES/S", "LOSS", "ETA", "CHECKPOINT", "")]
    for r in st["ranks"]:
        ck = r["checkpoint"]
        rt.append((str(r["rank"]), _fmt(r["node"]), f"{r['step']}/{_fmt(r['total'])}", _fmt(r["percent"], ".1f"),
                   _fmt(r["samples_per_sec"], ",.1f"), _fmt(r["loss"], ".4f"), rec_mod.format_eta(r["eta_s"]),
                   f"step {ck['step']}" if ck else "-", "<- slowest" if r["slowest"] else ""))
    return out + _table(rt)


def _table(rows: list[tuple]) -> list[str]:
    rows = [tuple(visible(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def progress_cell(st: dict) -> str:
    """The ``ps`` column: step/total and ETA (or the result)."""
    p = st["progress"]
    if not p:
        return "-"
    total = f"/{p['total']}" if p["total"] else ""
    tail = f" ETA {rec_mod.format_eta(p['eta_s'])}" if st["state"] == "running" else ""
    return visible(f"{p['step']}{total}{tail}")
