"""Apply a :class:`~ddpctl.local.plan.LocalPlan` to an engine, and find/stream/remove jobs by label.

This is the only module of the local cluster with side effects. Rules:

- preflight first (engine reachable, GPUs, image, name clash, port): nothing is created on bad input;
- creation is all-or-nothing: a failure (or Ctrl-C) halfway removes what was created;
- every container and network carries the job labels, so ``ps``, ``logs`` and ``down`` need no state;
- a finished job of the same name is replaced; a running one is a clash.
"""

from __future__ import annotations

import errno
import os
import queue
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from ddpctl.errors import EngineError, JobFailed, UsageError
from ddpctl.launch import LABEL_JOB, LABEL_MANAGED_BY, LABEL_NODE_RANK, MANAGED_BY
from ddpctl.local.engine import ContainerInfo, Engine
from ddpctl.local.plan import LocalPlan, container_request

MANAGED = f"{LABEL_MANAGED_BY}={MANAGED_BY}"

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def port_free(port: int) -> bool:
    """Can a process on this host listen on ``port`` (host networking)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def job_label(job: str) -> str:
    return f"{LABEL_JOB}={job}"


# ------------------------------------------------------------------------------------------ preflight


def preflight(plan: LocalPlan, engine: Engine, *, host_gpus: int,
              port_check: Callable[[int], bool] = port_free) -> list[ContainerInfo]:
    """Raise on anything that would make ``up`` fail; return a finished earlier run to replace."""
    engine.ping()
    if plan.wants_gpus:
        need = plan.gpus_total
        per = plan.containers[0].gpus
        ids = sorted({int(i) for c in plan.containers for i in c.gpus.device_ids if i.isdigit()})
        if need > host_gpus or (ids and ids[-1] >= host_gpus):
            what = f"GPU ids {','.join(map(str, ids))}" if per.device_ids else f"{need} GPU(s)"
            raise UsageError(f"job {plan.job} asks for {what} but this host has {host_gpus} GPU(s)",
                             "lower --gpus-per-node / --nodes, or use --gpus-per-node 0 for a CPU run")
        if not engine.has_nvidia_runtime():
            raise EngineError("the Docker Engine has no NVIDIA runtime, so containers cannot get GPUs",
                              "install nvidia-container-toolkit and restart dockerd")
    if not engine.image_exists(plan.image):
        raise UsageError(f"image {plan.image} is not present on this Docker Engine",
                         "build it with 'make image-cpu' (CPU) / 'make image' (CUDA), or pass --image")
    existing = engine.containers(label=job_label(plan.job))
    running = [c for c in existing if c.running]
    if running:
        raise UsageError(f"job {plan.job} is already running ({len(running)} container(s))",
                         f"stop it with 'ddpctl down {plan.job}' or choose another --name")
    mine = {c.id for c in existing}
    for c in plan.containers:
        for other in engine.containers(name=c.name):
            if other.id not in mine:
                raise UsageError(f"a container named {c.name} already exists and is not part of job {plan.job}",
                                 f"remove it ('docker rm -f {c.name}') or choose another --name")
    if plan.network:
        for net in engine.networks(name=plan.network):
            if net.labels.get(LABEL_JOB) != plan.job:
                raise UsageError(f"a network named {plan.network} already exists and is not job {plan.job}'s",
                                 f"remove it ('docker network rm {plan.network}') or choose another --name")
    if _engine_is_local():
        for m in plan.containers[0].mounts if plan.containers else ():
            if m.bind and not os.path.exists(m.source):
                raise UsageError(f"bind-mount source {m.source} (for {m.target}) does not exist on this host",
                                 "create it or fix the path given to --volume / --workdir")
    if plan.host_network and not port_check(plan.port):
        raise UsageError(f"port {plan.port} is already in use on this host (host networking)",
                         "pick a free one with --port, or stop what listens on it")
    return existing


def host_cpus(engine: Engine | None = None) -> int:
    """CPUs of the host the containers run on (sets each process's OMP_NUM_THREADS, see ddpctl.launch).

    A local engine (unix socket) shares this machine's CPUs; a remote one is asked (``docker info`` NCPU).
    """
    if engine is not None and not _engine_is_local():
        try:
            client = getattr(engine, "client", None)  # DockerEngine; other engines cannot say
            ncpu = int(client.info().get("NCPU") or 0) if client is not None else 0
            if ncpu > 0:
                return ncpu
        except Exception:  # noqa: BLE001 - an engine that cannot say: assume this machine's count
            pass
    return os.cpu_count() or 1


def _engine_is_local() -> bool:
    """Bind sources can be checked only when the engine runs on this machine (a unix socket)."""
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


# ------------------------------------------------------------------------------------------- create


@dataclass
class Job:
    plan: LocalPlan
    ids: dict[int, str]  # rank -> container id
    network_id: str | None


def remove_job(engine: Engine, job: str, *, network: str | None = None) -> tuple[int, int]:
    """Remove every container and network labelled ``job``. Idempotent. Returns (containers, networks)."""
    n_c = n_n = 0
    for c in engine.containers(label=job_label(job)):
        engine.remove_container(c.id)
        n_c += 1
    nets = engine.networks(label=job_label(job))
    for net in nets:
        engine.remove_network(net.id)
        n_n += 1
    return n_c, n_n


def create(plan: LocalPlan, engine: Engine, *, say: Say = _quiet) -> Job:
    """Create the network and every container, or nothing at all."""
    ids: dict[int, str] = {}
    network_id = None
    try:
        if plan.network:
            network_id = engine.create_network(plan.network, dict(plan.network_labels))
        for c in plan.containers:
            ids[c.rank] = engine.create_container(container_request(c))
        return Job(plan, ids, network_id)
    except BaseException as exc:
        _rollback(engine, list(ids.values()), network_id)
        if isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, EngineError):
            raise
        raise EngineError(f"creating job {plan.job} failed ({_reason(exc)}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def start(job: Job, engine: Engine) -> None:
    """Start every node (node 0 first); a failure stops and removes the whole job."""
    try:
        for rank in sorted(job.ids):
            engine.start(job.ids[rank])
    except BaseException as exc:
        _rollback(engine, list(job.ids.values()), job.network_id)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise EngineError(f"starting job {job.plan.job} failed ({_reason(exc)}); nothing was left behind",
                          "fix the cause above and run 'ddpctl up' again") from None


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or exc.__class__.__name__
    return " ".join(str(text).split())[:240]


def _rollback(engine: Engine, cids: list[str], network_id: str | None) -> None:
    for cid in cids:
        try:
            engine.remove_container(cid)
        except Exception as exc:  # noqa: BLE001 - keep removing the rest; say what stayed
            print(f"warning: could not remove container {cid[:12]}: {_reason(exc)}", file=sys.stderr)
    if network_id:
        try:
            engine.remove_network(network_id)
        except Exception as exc:  # noqa: BLE001
            print(f"warning: could not remove network {network_id[:12]}: {_reason(exc)}", file=sys.stderr)


def up(plan: LocalPlan, engine: Engine, *, host_gpus: int, say: Say = _quiet,
       port_check: Callable[[int], bool] = port_free) -> Job:
    """Preflight, replace a finished run of the same name, create all, start all."""
    previous = preflight(plan, engine, host_gpus=host_gpus, port_check=port_check)
    if previous:
        say(f"removing the finished earlier run of job {plan.job}")
        remove_job(engine, plan.job)
    elif plan.network:
        remove_job(engine, plan.job)  # a network left without containers
    job = create(plan, engine, say=say)
    start(job, engine)
    return job


# -------------------------------------------------------------------------------------------- attach

COLORS = ["\x1b[36m", "\x1b[33m", "\x1b[35m", "\x1b[32m", "\x1b[34m", "\x1b[31m"]
RESET = "\x1b[0m"


def prefix(rank: int, width: int, color: bool) -> str:
    text = f"node-{rank}".ljust(width) + " | "
    return f"{COLORS[rank % len(COLORS)]}{text}{RESET}" if color else text


def _split_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    buf = b""
    for chunk in chunks:
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode("utf-8", "replace").rstrip("\r")
    if buf:
        yield buf.decode("utf-8", "replace").rstrip("\r")


@dataclass
class Outcome:
    codes: dict[int, int]
    first_failure: int | None  # rank
    interrupted: bool = False


def attach(job: Job, engine: Engine, *, out=None, color: bool = False, stop_on_failure: bool = True) -> Outcome:
    """Stream every node's output (node-prefixed) until all exit; stop the job at the first failure."""
    out = out or sys.stdout
    q: queue.Queue = queue.Queue()
    width = len(f"node-{max(job.ids)}")

    def pump(rank: int, cid: str) -> None:
        try:
            for line in _split_lines(engine.logs(cid, follow=True)):
                q.put(("line", rank, line))
        except Exception as exc:  # noqa: BLE001 - the container was removed under us
            q.put(("line", rank, f"[ddpctl] log stream ended: {_reason(exc)}"))
        q.put(("exit", rank, engine.wait(cid)))

    threads = [threading.Thread(target=pump, args=(r, c), daemon=True) for r, c in job.ids.items()]
    for t in threads:
        t.start()
    codes: dict[int, int] = {}
    first: int | None = None
    while len(codes) < len(job.ids):
        try:
            kind, rank, value = q.get(timeout=0.2)
        except queue.Empty:
            continue
        if kind == "line":
            out.write(prefix(rank, width, color) + value + "\n")
            out.flush()
            continue
        codes[rank] = value
        if value != 0 and first is None:
            first = rank
            if stop_on_failure:
                for r, cid in job.ids.items():
                    if r not in codes:
                        threading.Thread(target=engine.stop, args=(cid, 5), daemon=True).start()
    return Outcome(codes, first)


def failure_message(job: str, rank: int, code: int, info: ContainerInfo | None) -> JobFailed:
    name = info.name if info else f"{job}-node-{rank}"
    why = " (OOM-killed)" if info and info.oom_killed else " (killed)" if code == 137 else ""
    exc = JobFailed(f"node {rank} ({name}) of job {job} exited with code {code}{why}",
                    f"see 'ddpctl logs {job} --node {rank}'; remove the job with 'ddpctl down {job}'")
    exc.exit_code = code if 0 < code < 256 else 1
    return exc


# ------------------------------------------------------------------------------------- ps/logs/down


@dataclass(frozen=True)
class NodeRow:
    job: str
    rank: int
    name: str
    state: str
    exit_code: int | None
    created: float


def list_nodes(engine: Engine, job: str | None = None) -> list[NodeRow]:
    rows = []
    for c in engine.containers(label=job_label(job) if job else MANAGED):
        if LABEL_JOB not in c.labels:
            continue
        rank = int(c.labels.get(LABEL_NODE_RANK, "-1")) if c.labels.get(LABEL_NODE_RANK, "").isdigit() else -1
        rows.append(NodeRow(c.labels[LABEL_JOB], rank, c.name, c.state, c.exit_code, c.created))
    return sorted(rows, key=lambda r: (r.job, r.rank))


def format_age(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def job_nodes(engine: Engine, job: str, node: int | None = None) -> dict[int, ContainerInfo]:
    found = {}
    for c in engine.containers(label=job_label(job)):
        r = c.labels.get(LABEL_NODE_RANK, "")
        if r.isdigit() and (node is None or int(r) == node):
            found[int(r)] = c
    if not found:
        what = f"node {node} of job {job}" if node is not None else f"job {job}"
        raise UsageError(f"no containers for {what}", "list jobs with 'ddpctl ps'")
    return found


def merged_logs(engine: Engine, job: str, *, node: int | None = None, tail: int | None = None,
                since: float | None = None) -> list[tuple[int, str]]:
    """Every node's log lines, merged in time order."""
    entries: list[tuple[str, int, str]] = []
    for rank, c in job_nodes(engine, job, node).items():
        for line in _split_lines(engine.logs(c.id, tail=tail, since=since, timestamps=True)):
            stamp, _, text = line.partition(" ")
            entries.append((stamp, rank, text))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [(rank, text) for _, rank, text in entries]


def follow_logs(engine: Engine, job: str, *, node: int | None = None, tail: int | None = None,
                since: float | None = None) -> Iterator[tuple[int, str]]:
    nodes = job_nodes(engine, job, node)
    q: queue.Queue = queue.Queue()

    def pump(rank: int, cid: str) -> None:
        try:
            for line in _split_lines(engine.logs(cid, follow=True, tail=tail, since=since)):
                q.put((rank, line))
        finally:
            q.put((rank, None))

    for rank, c in nodes.items():
        threading.Thread(target=pump, args=(rank, c.id), daemon=True).start()
    open_streams = len(nodes)
    while open_streams:
        try:
            rank, line = q.get(timeout=0.2)
        except queue.Empty:
            continue
        if line is None:
            open_streams -= 1
            continue
        yield rank, line


def all_jobs(engine: Engine) -> list[str]:
    jobs = {c.labels.get(LABEL_JOB) for c in engine.containers(label=MANAGED)}
    jobs |= {n.labels.get(LABEL_JOB) for n in engine.networks(label=MANAGED)}
    return sorted(j for j in jobs if j)


def wait_for_line(engine: Engine, cid: str, needle: str, timeout: float) -> bool:
    """Used by benchmarks: block until ``needle`` shows in a container's output."""
    deadline = time.monotonic() + timeout
    for line in _split_lines(engine.logs(cid, follow=True)):
        if needle in line:
            return True
        if time.monotonic() > deadline:
            return False
    return False
