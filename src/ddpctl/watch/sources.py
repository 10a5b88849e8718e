"""Where ``status``, ``ps`` and ``plot`` find a job's output: its containers (this host or ``--docker-hosts``)
with the kept output of its earlier attempts, the kept folder of a job that is gone
(:mod:`ddpctl.joboutput.kept_output`), a Slurm job's output file in its submit directory, or files named on the
command line. Each gives a :class:`~ddpctl.watch.status.JobView`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ddpctl import launch
from ddpctl.errors import UsageError
from ddpctl.joboutput import kept_output, tensorboard
from ddpctl.joboutput.records import stamp_seconds
from ddpctl.watch.status import JobView, NodeView

STATUS_TAIL = 5000  # lines of each node's live output status and ps read (plot: all, within the bounds)
KEPT_TAIL = 200_000  # lines of each kept node log plot reads (status: STATUS_TAIL), the newest
FILE_READ_BYTES = 32 * 2**20  # of a Slurm output file or a file given to plot: its last this many bytes


def docker_view(engine, job: str, *, tail: int | None = STATUS_TAIL) -> JobView | None:
    """A job that has containers on ``engine``; None when it has none."""
    from ddpctl.joboutput.reading import NodeOutput, read_node
    from ddpctl.launch import job_label

    found = [c for c in engine.containers(label=job_label(job)) if c.labels.get(kept_output.LABEL_NODE, "").isdigit()]
    if not found:
        return None
    attempt = max(kept_output.attempt_of(c.labels) for c in found)
    view = JobView(job, "docker", restarts=attempt)
    kept = kept_output.find(job, tail=tail or KEPT_TAIL) if attempt > 0 else None
    if kept is not None:
        view.notes += kept.notes()
        view.lines += kept.texts(attempts=range(attempt))
    from concurrent.futures import ThreadPoolExecutor

    def read(c) -> NodeOutput:
        try:
            return read_node(engine, c.id, tail=tail)
        except Exception:  # noqa: BLE001 - removed meanwhile ('ddpctl down', a restart): no lines
            return NodeOutput()

    found.sort(key=lambda c: int(c.labels[kept_output.LABEL_NODE]))
    view.tensorboard = tensorboard.locate(next(c for c in found if kept_output.attempt_of(c.labels) == attempt))
    with ThreadPoolExecutor(max_workers=min(16, len(found))) as pool:  # one request per node, side by side
        outputs = list(pool.map(read, found))
    for c, output in zip(found, outputs, strict=True):
        last = None
        for line in output.lines:
            stamp, _, text = line.partition(" ")
            view.lines.append(text)
            last = stamp
        note = output.note(int(c.labels[kept_output.LABEL_NODE]))
        if note:
            view.notes.append(note)
        view.nodes.append(NodeView(int(c.labels[kept_output.LABEL_NODE]), c.state, c.exit_code, attempt, c.name, c.host,
                                   stamp_seconds(last) if last else None))
    return view


def kept_view(kept: kept_output.Kept) -> JobView:
    m = kept.meta
    attempt = max((a for a, _ in kept.lines), default=0)
    tb = m.get("tensorboard")
    if tb and tb.get("kept"):  # in this folder, wherever it is now (a new run of the name moves the old one)
        tb = {**tb, "kept": str(kept.folder / tensorboard.KEEP_DIR)}
    view = JobView(m.get("job", kept.folder.name), "kept", lines=kept.texts(), restarts=m.get("restarts", attempt),
                   state=m.get("state") or "exited", result=m.get("result"), kept=str(kept.folder), tensorboard=tb,
                   notes=kept.notes())
    codes = m.get("exit_codes") or {}
    for (a, n), lines in sorted(kept.lines.items()):
        if a == attempt:
            view.nodes.append(NodeView(n, "removed" if m.get("removed") else (m.get("state") or "exited"),
                                       codes.get(str(n)), attempt, f"{view.job}-node-{n}",
                                       (m.get("hosts") or {}).get(str(n), ""),
                                       stamp_seconds(lines[-1][0]) if lines else None))
    return view


def job_view(engine, job: str, *, tail: int | None = STATUS_TAIL) -> JobView:
    """A job's containers, else its kept output (each node's last ``tail`` lines, :data:`KEPT_TAIL` when None);
    a one-line error when neither exists."""
    view = docker_view(engine, job, tail=tail) if engine is not None else None
    if view is not None:
        return view
    kept = kept_output.find(job, tail=tail or KEPT_TAIL)
    if kept is not None:
        return kept_view(kept)
    raise UsageError(f"no job {job}: no containers and no kept output in {kept_output.root()}",
                     "list jobs with 'ddpctl ps --all'")


_FIELD = re.compile(r"(\w+)=(\S*)")


def slurm_view(job_id: str, directory: Path) -> JobView:
    """A Slurm job of a rendered script: scontrol's state, restarts and exit code (while slurmctld still
    knows the job), its ranks' records from the job's output file (StdOut, else DIR/*-JOBID.out)."""
    if not job_id.isdigit():
        raise UsageError(f"--slurm {job_id!r} is not a Slurm job id", "pass the number sbatch printed")
    fields: dict[str, str] = {}
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            fields = dict(_FIELD.findall(out.stdout))
    except (OSError, subprocess.TimeoutExpired):
        pass
    path = Path(fields["StdOut"]) if fields.get("StdOut") else None
    if path is None or not path.is_file():
        hits = sorted(directory.glob(f"*{job_id}*.out")) or sorted(directory.glob(f"*{job_id}*"))
        path = hits[0] if hits else None
    if path is None and not fields:
        raise UsageError(f"Slurm job {job_id}: scontrol does not know it and {directory} has no *{job_id}*.out",
                         "run status in the job's submit directory, or pass --dir DIR")
    lines, note = read_file_tail(path) if path else ([], None)
    state = fields.get("JobState", "").lower() or "exited"
    code = fields.get("ExitCode", "")
    exit_code = int(code.split(":")[0]) if code.split(":")[0].isdigit() else None
    restarts = int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else 0
    nodes = int(fields["NumNodes"]) if fields.get("NumNodes", "").isdigit() else 1
    mtime = os.path.getmtime(path) if path else None
    running = state in ("running", "completing", "pending", "configuring", "requeued")
    view = JobView(fields.get("JobName") or f"slurm-{job_id}", "slurm", lines=lines, restarts=restarts,
                   state="running" if running else state, kept=str(path) if path else None,
                   notes=[note] if note else [])
    if not running:
        view.result = "succeeded" if state == "completed" and exit_code == 0 else "failed"
    for n in range(nodes):
        view.nodes.append(NodeView(n, state, None if running else exit_code, restarts,
                                   f"slurm job {job_id}", "", mtime))
    tb = Path(fields.get("WorkDir") or directory) / launch.checkpoint_volume(fields["JobName"]) / "tensorboard" \
        if fields.get("JobName") else None  # the script's default $DDPCTL_CHECKPOINTS/tensorboard
    if tb is not None and tb.is_dir():
        view.tensorboard = {"dir": str(tb), "host_path": str(tb)}
    return view


def file_view(path: Path) -> JobView:
    """``plot FILE``: a kept job folder, a progress.jsonl, or any output/log file with records."""
    if path.is_dir():
        kept = kept_output.load(path, tail=KEPT_TAIL)
        if kept is None or not kept.lines and not (path / "progress.jsonl").exists():
            raise UsageError(f"{path} is not a kept job folder", "pass a job name, a folder under "
                             f"{kept_output.root()}, or a file with progress records")
        return kept_view(kept)
    try:
        found, note = read_file_tail(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror or exc})", "pass a job name or a readable file") from None
    lines = [ln.partition(" ")[2] if stamp_seconds(ln.partition(" ")[0]) else ln for ln in found]
    return JobView(path.name, "files", lines=lines, state="exited", notes=[note] if note else [])


def read_file_tail(path: Path, limit: int = FILE_READ_BYTES) -> tuple[list[str], str | None]:
    """The lines of the last ``limit`` bytes of a file (the first, partial one dropped when it was cut), and a
    note saying what was left out (None when nothing was)."""
    from ddpctl.joboutput.reading import NODE_READ_LINES, read_chunks

    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))

        def chunks():
            while chunk := f.read(1 << 20):
                yield chunk

        out = read_chunks(chunks(), limit=limit + 1, max_lines=NODE_READ_LINES, newest=True)
    if size > limit and out.lines and not out.stopped:
        out.lines.pop(0)  # the first line read began before the part read
    said = [f"read only its last {limit // 2**20} MiB of {size:,} bytes"] if size > limit else []
    if out.stopped:
        said.append(f"kept only its last {len(out.lines):,} lines")
    if out.cut_lines:
        said.append(f"{out.cut_lines} line(s) over 64 KiB cut there ({out.cut_bytes:,} bytes not shown)")
    return out.lines, (f"{path.name}: " + "; ".join(said)) if said else None
