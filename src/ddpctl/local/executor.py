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
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

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
        if not engine.has_nvidia_runtime(plan.image):
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


def secret_values(plan: LocalPlan, environ: Mapping[str, str]) -> dict[str, str]:
    """The values of the plan's secret references, from ``environ`` (the caller's environment, read now)."""
    missing = [n for n in plan.secret_names if n not in environ]
    if missing:
        names = ", ".join(missing)
        raise UsageError(f"secret env {names} is not set in this environment (--secret-env takes the value from "
                         "the environment of ddpctl up)", f"export {missing[0]}=... and run 'ddpctl up' again")
    return {n: environ[n] for n in plan.secret_names}


def create(plan: LocalPlan, engine: Engine, *, say: Say = _quiet,
           secrets: Mapping[str, str] | None = None) -> Job:
    """Create the network and every container, or nothing at all."""
    if secrets is None:
        secrets = secret_values(plan, os.environ)
    ids: dict[int, str] = {}
    network_id = None
    try:
        if plan.network:
            network_id = engine.create_network(plan.network, dict(plan.network_labels))
        for c in plan.containers:
            ids[c.rank] = engine.create_container(container_request(c, secrets))
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
        reason = _reason(exc)
        launcher = job.plan.containers[0].argv[0] if job.plan.containers else ""
        if "executable file not found" in reason and launcher and launcher in reason:
            raise EngineError(f"image {job.plan.image} has no '{launcher}' (the ddp-train package's torchrun "
                              "wrapper every node starts with); nothing was left behind",
                              f"build on it with 'ddpctl image build --base {job.plan.image} --tag ...', or "
                              "'pip install' this project in it") from None
        raise EngineError(f"starting job {job.plan.job} failed ({reason}); nothing was left behind",
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
       port_check: Callable[[int], bool] = port_free, environ: Mapping[str, str] | None = None) -> Job:
    """Preflight, replace a finished run of the same name, create all, start all.

    Secret references take their values from ``environ`` (default: this process's environment), read here,
    when the job starts: never in the plan or a dry run."""
    secrets = secret_values(plan, os.environ if environ is None else environ)
    previous = preflight(plan, engine, host_gpus=host_gpus, port_check=port_check)
    if previous:
        say(f"removing the finished earlier run of job {plan.job}")
        remove_job(engine, plan.job)
    elif plan.network:
        remove_job(engine, plan.job)  # a network left without containers
    job = create(plan, engine, say=say, secrets=secrets)
    start(job, engine)
    return job


# -------------------------------------------------------------------------------------------- attach

COLORS = ["\x1b[36m", "\x1b[33m", "\x1b[35m", "\x1b[32m", "\x1b[34m", "\x1b[31m"]
RESET = "\x1b[0m"

# ddp-train-launch (ddp_train.launcher) writes each worker line as "rank-<global rank> | <text>" and ends a
# failure with one line naming the root-cause rank. Kept in step with ddp_train.launcher by a unit test
# (ddpctl never imports ddp_train: the image's launcher and this parser meet only in the text).
RANK_LINE = re.compile(r"^rank-(\d+) \| ")
LAUNCH_FAILURE = re.compile(r"^ddp-train-launch: rank (\d+) failed \(exit code (\d+)([^)]*)\)(?:: (.*))?$")
PEER_GRACE_S = 5.0  # after a node that lost a peer exits, how long the others may take to report before a stop
LAUNCHER = "ddp-train-launch"  # plain torchrun (a job started by an older ddpctl) does not prefix ranks


def split_rank(line: str) -> tuple[int | None, str]:
    """``rank-3 | text`` -> (3, "text"); a line not from a worker (the launcher's own) -> (None, line)."""
    m = RANK_LINE.match(line)
    if m:
        return int(m.group(1)), line[m.end():]
    return None, line


def label(node: int, rank: int | None) -> str:
    return f"node-{node}" if rank is None else f"node-{node} rank-{rank}"


def prefix(node: int, width: int, color: bool, rank: int | None = None) -> str:
    """``node-1 rank-3 | `` (worker lines) or ``node-1 | `` (the node's launcher), padded to ``width``."""
    text = label(node, rank).ljust(width) + " | "
    return f"{COLORS[node % len(COLORS)]}{text}{RESET}" if color else text


def format_line(node: int, line: str, width: int, color: bool) -> str:
    rank, text = split_rank(line)
    return prefix(node, width, color, rank) + text


def label_width(nodes: int, world_size: int) -> int:
    return len(label(max(nodes - 1, 0), max(world_size - 1, 0)))


def node_ranks(command: tuple[str, ...] | list[str]) -> range | None:
    """The global ranks a node runs, from its launcher's static-rendezvous flags (None if unknown)."""
    if not command or command[0].rsplit("/", 1)[-1] != LAUNCHER:
        return None
    flags: dict[str, str] = {}
    args = list(command[1:])
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--no-python":
        key, eq, value = args[i].partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
            value = args[i + 1]
            i += 1
        flags[key.replace("_", "-")] = value
        i += 1
    try:
        nproc, node = int(flags["--nproc-per-node"]), int(flags["--node-rank"])
    except (KeyError, ValueError):
        return None
    return range(node * nproc, (node + 1) * nproc)


def silent_ranks_line(node: int, expected: range | None, seen: set[int], *, window: bool = False) -> str | None:
    """One line naming the ranks of ``node`` that printed nothing, or None when every rank printed."""
    if expected is None:
        return None
    quiet = [r for r in expected if r not in seen]
    if not quiet:
        return None
    names = ", ".join(f"rank-{r}" for r in quiet)
    where = " in the lines selected" if window else ""
    if len(quiet) == len(expected):
        return f"node-{node}: its rank(s) {names} printed nothing{where}"
    return f"node-{node}: {names} printed nothing{where}"


class OutputClosed(Exception):
    """stdout was closed by its reader (``ddpctl up ... | head``)."""


def _stdout_closed(out) -> bool:
    """Has the reader of ``out`` gone away (a pipe whose read end is closed)? Checked without writing."""
    import select

    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    try:
        p = select.poll()
        p.register(fd, 0)  # POLLERR/POLLHUP are reported whatever the mask
        return any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, ev in p.poll(0))
    except (OSError, ValueError):
        return False


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
    codes: dict[int, int]  # node -> exit code, in the order the nodes exited
    first_failure: int | None  # node
    interrupted: bool = False
    stopped: set[int] = field(default_factory=set)  # nodes ddpctl stopped after the first failure


def attach(job: Job, engine: Engine, *, out=None, color: bool = False, stop_on_failure: bool = True) -> Outcome:
    """Stream every node's output until all exit; stop the job at the first failure.

    Each line is ``node-N rank-R | text`` (a worker) or ``node-N | text`` (the node's launcher). Raises
    :class:`OutputClosed` when nobody reads stdout any more; the caller stops the job then.
    """
    out = out or sys.stdout
    q: queue.Queue = queue.Queue()
    width = label_width(len(job.plan.containers) or max(job.ids) + 1, job.plan.world_size)

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
    stopped: set[int] = set()
    lost_peer: set[int] = set()  # nodes whose launcher said its failure was a lost peer
    stop_at: float | None = None

    def stop_the_rest() -> None:
        for r, cid in job.ids.items():
            if r not in codes and r not in stopped:
                stopped.add(r)
                threading.Thread(target=engine.stop, args=(cid, 5), daemon=True).start()

    while len(codes) < len(job.ids):
        if stop_at is not None and time.monotonic() >= stop_at:
            stop_at = None
            stop_the_rest()
        try:
            kind, rank, value = q.get(timeout=0.2)
        except queue.Empty:
            if _stdout_closed(out):
                raise OutputClosed() from None
            continue
        if kind == "line":
            found = LAUNCH_FAILURE.match(value)
            if found and "lost a peer" in (found.group(3) or ""):
                lost_peer.add(rank)
            try:
                out.write(format_line(rank, value, width, color) + "\n")
                out.flush()
            except BrokenPipeError:
                raise OutputClosed() from None
            continue
        codes[rank] = value
        if value != 0 and first is None:
            first = rank
            if stop_on_failure:
                # A node that only lost its peer failed second: give the node that failed first a moment to
                # report its own root cause before it is stopped.
                stop_at = time.monotonic() + (PEER_GRACE_S if rank in lost_peer else 0.0)
    return Outcome(codes, first, stopped=stopped)


@dataclass(frozen=True)
class NodeFailure:
    """What a failed node's launcher said about its root cause (its last ``ddp-train-launch`` line)."""

    node: int
    exit_code: int
    rank: int | None = None
    last_line: str = ""
    secondary: bool = False  # the node failed because another one did (lost a peer, stopped by ddpctl)


def parse_launch_failure(lines: list[str]) -> tuple[int, int, str, str] | None:
    """(rank, exit code, notes, last error line) from the launcher's root-cause line, the last one wins."""
    for line in reversed(lines):
        m = LAUNCH_FAILURE.match(line)
        if m:
            return int(m.group(1)), int(m.group(2)), m.group(3) or "", m.group(4) or ""
    return None


def node_failure(engine: Engine, node: int, cid: str, code: int, *, stopped: bool = False) -> NodeFailure:
    lines = list(_split_lines(engine.logs(cid, tail=40)))
    found = parse_launch_failure(lines)
    if found is None:
        by_signal = any(line.startswith("ddp-train-launch: stopped by ") for line in lines[-3:])
        return NodeFailure(node, code, secondary=stopped and (by_signal or code in (137, 143)))
    rank, _, notes, last = found
    return NodeFailure(node, code, rank, last, secondary="lost a peer" in notes or (stopped and code == 143))


def root_cause(failures: list[NodeFailure]) -> NodeFailure:
    """The node to blame: the first (in exit order) that did not fail because of another one."""
    primary = [f for f in failures if not f.secondary]
    return (primary or failures)[0]


def job_root_cause(job: Job, engine: Engine, outcome: Outcome) -> NodeFailure | None:
    failed = [(n, c) for n, c in outcome.codes.items() if c != 0]
    if not failed:
        return None
    found = []
    for node, code in failed:
        try:
            found.append(node_failure(engine, node, job.ids[node], code, stopped=node in outcome.stopped))
        except Exception:  # noqa: BLE001 - the logs are gone: still name the node and its code
            found.append(NodeFailure(node, code, secondary=node in outcome.stopped))
    return root_cause(found)


def failure_message(job: str, rank: int, code: int, info: ContainerInfo | None,
                    cause: NodeFailure | None = None) -> JobFailed:
    """One line: the node, its container, the root-cause rank, exit code and last error line."""
    name = info.name if info else f"{job}-node-{rank}"
    why = " (OOM-killed)" if info and info.oom_killed else " (killed)" if code == 137 else ""
    text = f"node {rank} ({name}) of job {job} exited with code {code}{why}"
    if cause is not None and cause.rank is not None:
        last = cause.last_line or "(no error output)"
        text = f"node {rank} ({name}) of job {job} failed: rank {cause.rank} exited with code {code}{why}: {last}"
    exc = JobFailed(text, f"see 'ddpctl logs {job} --node {rank}'; remove the job with 'ddpctl down {job}'")
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
