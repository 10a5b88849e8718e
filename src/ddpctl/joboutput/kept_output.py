"""Output that outlives the job: when an ``up`` job ends, restarts or is taken ``down``, each node's output
(every attempt of a restarted job), its progress records and its summary are kept in a per-job folder under
the user's state directory, ``$XDG_STATE_HOME/ddpctl/jobs/<job>/`` (``~/.local/state`` when unset):

    meta.json                 job, nodes, hosts, attempts, exit codes, state, result, start, end, final samples/s
    attempt-<R>/node-<N>.log  node N's output of attempt R (R restarts before it), each line "<RFC 3339 UTC> text"
    progress.jsonl            every progress record of every attempt, in order
    summary.json              the last summary line (when the run wrote one)
    tensorboard/              ddp-train's TensorBoard event files, copied when down removes their volume

Bounded: a node's log keeps its last :data:`NODE_LOG_BYTES`; the folder keeps the newest :data:`MAX_JOBS` jobs and
at most :data:`MAX_TOTAL_BYTES` in all, the oldest pruned first. A new run of a job name moves the folder of the
previous run to ``<job>@<end time>``. ``ddpctl logs``, ``status``, ``ps --all`` and ``plot`` read it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ddpctl.joboutput import records as rec_mod
from ddpctl.joboutput import tensorboard

NODE_LOG_BYTES = 20 * 2**20
MAX_JOBS = 50
MAX_TOTAL_BYTES = 500 * 2**20
LABEL_JOB, LABEL_NODE, LABEL_RESTARTS = "ddpctl.job", "ddpctl.node-rank", "ddpctl.restarts"


def root() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ddpctl" / "jobs"


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def attempt_of(labels: dict) -> int:
    """A container's attempt from its labels: 0 for the first start, N after the job's Nth restart."""
    r = labels.get(LABEL_RESTARTS, "")
    return int(r) if r.isdigit() else 0


def keep(engine, job: str, *, removing: bool = False) -> Path | None:
    """Copy the output of ``job``'s containers (as they are now) into its folder; None when it has none.
    ``removing``: the containers go next (``down``), so a running job's result is "stopped".
    Never raises: the job's removal or restart must go on whatever happens here."""
    try:
        return _keep(engine, job, removing)
    except Exception:  # noqa: BLE001 - best effort: a full disk or a container gone meanwhile keeps less
        return None


def _keep(engine, job: str, removing: bool) -> Path | None:
    from ddpctl.joboutput.lines import node_ranks, split_lines
    from ddpctl.launch import job_label

    found = [c for c in engine.containers(label=job_label(job)) if c.labels.get(LABEL_NODE, "").isdigit()]
    if not found:
        return None
    folder = root() / job
    meta = _read_json(folder / "meta.json") or {}
    ids = meta.get("containers", {})
    now_ids = {str(attempt_of(c.labels)): {c.labels[LABEL_NODE]: c.id} for c in found}
    if any(ids.get(a, {}).get(n, cid) != cid for a, m in now_ids.items() for n, cid in m.items()):
        _rotate(folder, meta)  # a new run of this job name
        meta, ids = {}, {}
    for c in found:
        a, n = str(attempt_of(c.labels)), c.labels[LABEL_NODE]
        text = "\n".join(split_lines(engine.logs(c.id, timestamps=True)))
        data = text.encode("utf-8")[-NODE_LOG_BYTES:]
        (folder / f"attempt-{a}").mkdir(parents=True, exist_ok=True)
        (folder / f"attempt-{a}" / f"node-{n}.log").write_bytes(data + (b"\n" if data else b""))
        ids.setdefault(a, {})[n] = c.id
    last = max(int(a) for a in ids)
    cur = [c for c in found if attempt_of(c.labels) == last]
    codes = {c.labels[LABEL_NODE]: c.exit_code for c in cur if not c.running}
    hosts = {c.labels[LABEL_NODE]: c.host for c in cur if c.host}
    node0 = min(cur, key=lambda c: int(c.labels[LABEL_NODE]), default=None)  # rank 0 writes TensorBoard files
    tb = None if node0 is None else tensorboard.keep(engine, node0, folder) if removing else tensorboard.locate(node0)
    kept = load(folder)
    ranks, summary = rec_mod.collect(kept.texts() if kept else [])
    with open(folder / "progress.jsonl", "w", encoding="utf-8") as f:
        for rp in sorted(ranks.values(), key=lambda r: r.rank):
            for r in rp.records:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    if summary is not None:
        _write(folder / "summary.json", json.dumps(summary) + "\n")
    running = any(c.running for c in cur)
    started = min([meta.get("started") or 1e18] + [c.created for c in found])
    same = not running and meta.get("state") == "exited" and meta.get("attempts") == last + 1 and meta.get("ended")
    ended = meta["ended"] if same else (None if running and not removing else time.time())
    result = "running" if running else ("succeeded" if codes and all(v == 0 for v in codes.values()) else "failed")
    if running and removing:
        result = "stopped"  # taken down while it ran
    worlds = [r.stop for r in (node_ranks(c.command) for c in cur) if r]
    final = (summary or {}).get("images_per_sec")
    if final is None:
        prog = rec_mod.job_progress(ranks)
        final = prog["samples_per_sec"] if prog else None
    meta.update(job=job, containers=ids, attempts=last + 1, restarts=last, nodes=len(cur), hosts=hosts,
                exit_codes=codes, state="running" if running and not removing else "exited", result=result,
                world_size=max(worlds) if worlds else None, removed=removing or meta.get("removed", False), started=started,
                ended=ended, duration_s=None if ended is None else round(ended - started, 1),
                final_samples_per_sec=final, records=sum(len(rp.records) for rp in ranks.values()), tensorboard=tb)
    _write(folder / "meta.json", json.dumps(meta, indent=1) + "\n")
    prune(keep_name=job)
    return folder


def _rotate(folder: Path, meta: dict) -> None:
    if folder.exists():
        when = int(meta.get("ended") or meta.get("started") or time.time())
        target = folder.with_name(f"{folder.name}@{when}")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        folder.rename(target)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def prune(keep_name: str | None = None) -> list[str]:
    """Remove the oldest kept jobs beyond :data:`MAX_JOBS` or :data:`MAX_TOTAL_BYTES`; returns their names."""
    base = root()
    if not base.is_dir():
        return []
    jobs = []
    for d in base.iterdir():
        if d.is_dir():
            m = _read_json(d / "meta.json") or {}
            jobs.append((m.get("ended") or m.get("started") or d.stat().st_mtime, d))
    jobs.sort(key=lambda j: j[0], reverse=True)
    total, removed = 0, []
    for i, (_, d) in enumerate(jobs):
        total += _size(d)
        if d.name != keep_name and (i >= MAX_JOBS or total > MAX_TOTAL_BYTES):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


@dataclass
class Kept:
    """A kept job read back: its folder, meta, and each node's lines (stamp, text) per attempt."""

    folder: Path
    meta: dict
    lines: dict[tuple[int, int], list[tuple[str, str]]]  # (attempt, node) -> [(stamp, text)]

    def texts(self, attempts=None) -> list[str]:
        return [t for (a, _), ls in sorted(self.lines.items()) if attempts is None or a in attempts for _, t in ls]

    def merged(self, node: int | None = None, attempt: int | None = None) -> list[tuple[int, str]]:
        """(node, text) in time order, as ``ddpctl logs`` prints them (the last attempt unless one is named)."""
        a = max((k[0] for k in self.lines), default=0) if attempt is None else attempt
        entries = [(s, n, t) for (at, n), ls in self.lines.items() if at == a and (node is None or n == node)
                   for s, t in ls]
        entries.sort(key=lambda e: (e[0], e[1]))
        return [(n, t) for _, n, t in entries]


def load(folder: Path) -> Kept | None:
    meta = _read_json(folder / "meta.json")
    if meta is None and not folder.is_dir():
        return None
    lines = {}
    for d in sorted(folder.glob("attempt-*")):
        a = d.name.split("-", 1)[1]
        for f in sorted(d.glob("node-*.log")):
            n = f.stem.split("-", 1)[1]
            if a.isdigit() and n.isdigit():
                out = []
                for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                    stamp, _, text = line.partition(" ")
                    out.append((stamp, text))
                lines[(int(a), int(n))] = out
    return Kept(folder, meta or {}, lines)


def find(job: str) -> Kept | None:
    """The newest kept run of ``job``."""
    folder = root() / job
    return load(folder) if (folder / "meta.json").exists() else None


def all_kept() -> list[Kept]:
    """Every kept job's folder and meta, its output not read (``ps --all`` lists them in bounded work)."""
    base = root()
    if not base.is_dir():
        return []
    out = [Kept(d, m, {}) for d in sorted(base.iterdir()) if d.is_dir() and (m := _read_json(d / "meta.json"))]
    return sorted(out, key=lambda k: k.meta.get("started") or 0)
