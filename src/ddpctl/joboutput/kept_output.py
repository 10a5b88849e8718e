"""Output that outlives the job: when an ``up`` job ends, restarts or is taken ``down``, each node's output
(every attempt of a restarted job), its progress records and its summary are kept in a per-job folder under
the user's state directory, ``$XDG_STATE_HOME/ddpctl/jobs/<job>/`` (``~/.local/state`` when unset):

    meta.json                 job, nodes, hosts, attempts, exit codes, state, result, start, end, final samples/s
    attempt-<R>/node-<N>.log  node N's output of attempt R (R restarts before it), each line "<RFC 3339 UTC> text"
    progress.jsonl            every progress record in the kept logs, in the order each node printed them
    summary.json              the last summary line (when the run wrote one)
    tensorboard/              ddp-train's TensorBoard event files, copied when down removes their volume

Bounded: a node's log keeps its last :data:`NODE_LOG_BYTES` (only that end is read from the Engine); the folder keeps the newest :data:`MAX_JOBS` jobs and
at most :data:`MAX_TOTAL_BYTES` in all, the oldest pruned first. A new run of a job name moves the folder of the
previous run to ``<job>@<end time>``. ``ddpctl logs``, ``status``, ``ps --all`` and ``plot`` read it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl.joboutput import kept_files, kept_meta, kept_node, tensorboard
from ddpctl.joboutput.kept_files import KeepFailed

NODE_LOG_BYTES = 20 * 2**20
MAX_JOBS = 50
MAX_TOTAL_BYTES = 500 * 2**20
META_BYTES = 4 * 2**20  # a meta.json larger than this is not one ddpctl wrote: read as empty
LABEL_JOB, LABEL_NODE, LABEL_RESTARTS = "ddpctl.job", "ddpctl.node-rank", "ddpctl.restarts"
__all__ = ["KeepFailed", "keep", "keep_or_fail", "load", "find", "all_kept", "prune", "root"]


def root() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ddpctl" / "jobs"


def _read_meta(dir_fd: int | None, name: str | Path) -> dict | None:
    data = kept_files.read_bytes(dir_fd, name, META_BYTES + 1)
    if data is None:
        return None
    try:
        raw = json.loads(data) if len(data) <= META_BYTES else {}
    except (ValueError, RecursionError):
        raw = {}
    return kept_meta.clean(raw)


def attempt_of(labels: dict) -> int:
    """A container's attempt from its labels: 0 for the first start, N after the job's Nth restart."""
    r = labels.get(LABEL_RESTARTS, "")
    return int(r) if r.isdigit() and len(r) <= 9 else 0


def keep(engine, job: str, *, removing: bool = False) -> Path | None:
    """Copy the output of ``job``'s containers (as they are now) into its folder; None when it has none or the
    keep failed (a restart goes on whatever happens here: its containers and their output are still there)."""
    try:
        return keep_or_fail(engine, job, removing=removing)
    except KeepFailed:
        return None


def keep_or_fail(engine, job: str, *, removing: bool = False) -> Path | None:
    """:func:`keep` that raises :class:`KeepFailed` (one line: why, and what to do) when the output could not be
    kept: ``down`` and the end of an attached ``up`` then leave the containers (and so the output) in place."""
    try:
        return _keep(engine, job, removing)
    except KeepFailed:
        raise
    except OSError as exc:
        name = str(exc.filename or "")
        where = root() / job / name if name.startswith("attempt-") else root() / job if name == job else \
            root().parent / name if name == root().name else root().parent if name == "ddpctl" else name or root() / job
        why = exc.strerror or exc
        raise KeepFailed(f"could not keep the output of job {job}: {where} ({why}); its containers stay",
                         f"fix the cause (free disk space, or remove {where}) and run 'ddpctl down {job}' again") from None
    except Exception as exc:  # noqa: BLE001 - any other failure: said, and the containers stay
        raise KeepFailed(f"could not keep the output of job {job} ({type(exc).__name__}: {str(exc)[:200]}); "
                         "its containers stay", f"run 'ddpctl down {job}' again, or 'ddpctl logs {job}' to read "
                         "the output meanwhile") from None


def _keep(engine, job: str, removing: bool) -> Path | None:
    from ddpctl.joboutput.lines import node_ranks
    from ddpctl.launch import job_label

    found = [c for c in engine.containers(label=job_label(job)) if c.labels.get(LABEL_NODE, "").isdigit()]
    if not found:
        return None
    base = root()
    jobs_fd = kept_files.open_path(base.parent.parent, (base.parent.name, base.name), create=True)
    try:
        meta = _read_meta(jobs_fd, f"{job}/meta.json") or {}
        if meta.get("containers") and _is_new_run(meta, found):
            _rotate(jobs_fd, job, meta)
            meta = {}
        job_fd = kept_files.open_folder(jobs_fd, job, create=True)
    finally:
        os.close(jobs_fd)
    folder = base / job
    try:
        kept_files.sweep_stale(job_fd)
        return _keep_into(engine, job, removing, found, folder, job_fd, meta, node_ranks)
    finally:
        os.close(job_fd)


def _is_new_run(meta: dict, found) -> bool:
    ids = meta["containers"]
    return any(ids.get(str(attempt_of(c.labels)), {}).get(c.labels[LABEL_NODE], c.id) != c.id for c in found)


def _keep_into(engine, job, removing, found, folder, job_fd, meta, node_ranks) -> Path:
    ids = dict(meta.get("containers") or {})
    with kept_files.AtomicFile(job_fd, "progress.jsonl") as progress:
        recs = kept_node.Records(progress)
        now = {(attempt_of(c.labels), int(c.labels[LABEL_NODE])): c for c in found}
        earlier = [(a, n) for a, n in _kept_nodes(job_fd) if (a, n) not in now]  # attempts whose containers went
        for a, n in sorted([*now, *earlier]):
            attempt_fd = kept_files.open_folder(job_fd, f"attempt-{a}", create=(a, n) in now)
            try:
                if (a, n) in now:
                    kept_files.sweep_stale(attempt_fd)
                    kept_node.keep_node(engine, now[a, n].id, attempt_fd, f"node-{n}.log", recs, NODE_LOG_BYTES)
                    ids.setdefault(str(a), {})[str(n)] = now[a, n].id
                else:
                    kept_node.read_node(attempt_fd, f"node-{n}.log", recs)
            finally:
                os.close(attempt_fd)
    last = max(int(a) for a in ids)
    cur = [c for c in found if attempt_of(c.labels) == last]
    codes = {c.labels[LABEL_NODE]: c.exit_code for c in cur if not c.running}
    hosts = {c.labels[LABEL_NODE]: c.host for c in cur if c.host}
    node0 = min(cur, key=lambda c: int(c.labels[LABEL_NODE]), default=None)  # rank 0 writes TensorBoard files
    tb = None if node0 is None else tensorboard.keep(engine, node0, folder) if removing else tensorboard.locate(node0)
    if recs.summary is not None:
        kept_files.write_file(job_fd, "summary.json", (kept_files.dumps(recs.summary) + "\n").encode("utf-8"))
    running = any(c.running for c in cur)
    started = min([meta.get("started") or 1e18] + [c.created for c in found])
    same = not running and meta.get("state") == "exited" and meta.get("attempts") == last + 1 and meta.get("ended")
    ended = meta["ended"] if same else (None if running and not removing else time.time())
    result = "running" if running else ("succeeded" if codes and all(v == 0 for v in codes.values()) else "failed")
    if running and removing:
        result = "stopped"  # taken down while it ran
    worlds = [r.stop for r in (node_ranks(c.command) for c in cur) if r]
    meta.update(job=job, containers=ids, attempts=last + 1, restarts=last, nodes=len(cur), hosts=hosts,
                exit_codes=codes, state="running" if running and not removing else "exited", result=result,
                world_size=max(worlds) if worlds else None, removed=removing or meta.get("removed", False), started=started,
                ended=ended, duration_s=None if ended is None else round(ended - started, 1),
                final_samples_per_sec=recs.final_rate(), records=recs.count, tensorboard=tb)
    text = kept_files.dumps(kept_meta.clean(meta), indent=1) + "\n"
    kept_files.write_file(job_fd, "meta.json", text.encode("utf-8"))
    prune(keep_name=job)
    return folder


def _kept_nodes(job_fd: int) -> list[tuple[int, int]]:
    """(attempt, node) of every node log in the job's folder (links skipped)."""
    out = []
    for a_name in os.listdir(job_fd):
        a = a_name.removeprefix("attempt-")
        if not (a_name.startswith("attempt-") and a.isdigit() and len(a) <= 9):
            continue
        try:
            a_fd = kept_files.open_folder(job_fd, a_name, create=False)
        except OSError:
            continue
        try:
            for f_name in os.listdir(a_fd):
                n = f_name.removeprefix("node-").removesuffix(".log")
                if f_name.startswith("node-") and f_name.endswith(".log") and n.isdigit() and len(n) <= 9:
                    out.append((int(a), int(n)))
        finally:
            os.close(a_fd)
    return out


def _rotate(jobs_fd: int, job: str, meta: dict) -> None:
    """A new run of ``job``: its previous run's folder moves to ``<job>@<end time>``."""
    when = int(meta.get("ended") or meta.get("started") or time.time())
    target = f"{job}@{when}"
    try:
        os.lstat(target, dir_fd=jobs_fd)
        shutil.rmtree(target, dir_fd=jobs_fd)  # never through a link: rmtree refuses one
    except FileNotFoundError:
        pass
    os.rename(job, target, src_dir_fd=jobs_fd, dst_dir_fd=jobs_fd)


def prune(keep_name: str | None = None) -> list[str]:
    """Remove the oldest kept jobs beyond :data:`MAX_JOBS` or :data:`MAX_TOTAL_BYTES`; returns their names."""
    base = root()
    if not kept_files.is_folder(base):
        return []
    jobs = []
    for d in base.iterdir():
        if kept_files.is_folder(d):
            m = _read_meta(None, d / "meta.json") or {}
            jobs.append((m.get("ended") or m.get("started") or d.lstat().st_mtime, d))
    jobs.sort(key=lambda j: j[0], reverse=True)
    total, removed = 0, []
    for i, (_, d) in enumerate(jobs):
        total += kept_files.tree_size(d)
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
    cut: dict[tuple[int, int], int] = field(default_factory=dict)  # (attempt, node) -> older lines not read (tail)

    def notes(self) -> list[str]:
        """One line per node log read only in part (``tail``), saying how much was left out."""
        return [f"node {n}: read only the last {len(self.lines[(a, n)]):,} lines of its kept output of attempt {a} "
                f"({c:,} older ones not read)" for (a, n), c in sorted(self.cut.items())]

    def texts(self, attempts=None) -> list[str]:
        return [t for (a, _), ls in sorted(self.lines.items()) if attempts is None or a in attempts for _, t in ls]

    def merged(self, node: int | None = None, attempt: int | None = None) -> list[tuple[int, str]]:
        """(node, text) in time order, as ``ddpctl logs`` prints them (the last attempt unless one is named)."""
        a = max((k[0] for k in self.lines), default=0) if attempt is None else attempt
        entries = [(s, n, t) for (at, n), ls in self.lines.items() if at == a and (node is None or n == node)
                   for s, t in ls]
        entries.sort(key=lambda e: (e[0], e[1]))
        return [(n, t) for _, n, t in entries]


def load(folder: Path, *, with_lines: bool = True, tail: int | None = None) -> Kept | None:
    """A kept job folder read back (None when ``folder`` is not a folder). Nothing inside it is read through a
    link; a node's log is read up to its last :data:`NODE_LOG_BYTES`, and only its last ``tail`` lines are held
    when ``tail`` is given (``status`` and ``plot``: memory bounded by lines, not by what the job printed; the
    lines left out are counted in :attr:`Kept.cut`); a bad meta.json reads as {} (or its good keys).
    ``with_lines=False``: the meta only."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        meta = _read_meta(fd, "meta.json")
        lines, cut = kept_files.read_node_logs(fd, NODE_LOG_BYTES, tail) if with_lines else ({}, {})
    finally:
        os.close(fd)
    if meta and not meta.get("job"):
        meta["job"] = folder.name.partition("@")[0]  # a meta.json without its job's name: the folder's
    return Kept(folder, meta or {}, lines, cut)


def find(job: str, *, with_lines: bool = True, tail: int | None = None) -> Kept | None:
    """The newest kept run of ``job`` (None when there is none, or its folder is a link: never followed); ``tail``
    as for :func:`load`."""
    folder = root() / job
    if not job or "/" in job or job in (".", "..") or not kept_files.is_folder(folder):
        return None
    kept = load(folder, with_lines=with_lines, tail=tail)
    return kept if kept is not None and kept.meta else None


def all_kept() -> list[Kept]:
    """Every kept job's meta (``lines`` not read: ``ps --all`` needs only the meta), oldest first."""
    base = root()
    if not kept_files.is_folder(base):
        return []
    out = [k for d in sorted(base.iterdir()) if kept_files.is_folder(d)
           and (k := load(d, with_lines=False)) is not None and k.meta]
    return sorted(out, key=lambda k: k.meta.get("started") or 0)
