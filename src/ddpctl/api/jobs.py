"""``ddpctl.up``, :class:`Job` (status, logs, wait, down), ``ddpctl.job`` and ``ddpctl.jobs``: the local cluster
from Python, and the one implementation of ``ddpctl up | status | logs | down`` (the CLI parses, calls the
functions here and prints).

A job is found by its name, through the labels of its containers (``ddpctl.job("ddp")`` needs no state), and
once it is gone through the output ``ddpctl`` keeps (:mod:`ddpctl.watch.history`).
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Iterator, Mapping, Sequence

from ddpctl.errors import JobFailed, UsageError

if TYPE_CHECKING:
    from ddpctl.api.job_status import JobStatus
    from ddpctl.local.engine_interface import ContainerInfo, Engine
    from ddpctl.local.plan import LocalPlan
    from ddpctl.spec import JobSpec

Say = Callable[[str], None]
log = logging.getLogger("ddpctl")
DOCKER_HOSTS_ENV = "DDPCTL_DOCKER_HOSTS"


def _quiet(_: str) -> None:
    pass


def hosts_flag(docker_hosts: str | Sequence[str] | None) -> str | None:
    """``--docker-hosts``'s value from a string or a list of hosts (None: ``$DDPCTL_DOCKER_HOSTS``, else
    DOCKER_HOST's engine)."""
    if docker_hosts is None or isinstance(docker_hosts, str):
        return docker_hosts
    return ",".join(docker_hosts)


def engine_for(docker_hosts: str | Sequence[str] | None) -> Engine:
    from ddpctl.cli.docker_hosts import engine_for as connect

    return connect(hosts_flag(docker_hosts))


def caller_user() -> str | None:
    """uid:gid of whoever runs ddpctl: the containers' default user, so files they write are the caller's."""
    if not hasattr(os, "getuid"):
        return None
    return f"{os.getuid()}:{os.getgid()}"


# ---- up: prepare (spec -> plan), start (all or nothing), and an attached run to its end


@dataclass
class Prepared:
    """A job ready to start: its spec (with the baked image, the Docker hosts' addresses), engine and plan."""

    spec: JobSpec
    engine: Engine
    plan: LocalPlan
    several: bool  # node i on Docker host i


def prepare(spec: JobSpec, *, bake: bool = False, pip: Any = None, allow_credentials: bool = False,
            job_file: str | None = None, dry_run: bool = False, say: Say = _quiet) -> Prepared:
    """Build the workspace image when asked (``up --bake``), place the nodes on their engine(s) and plan the
    containers; nothing is created (with ``dry_run`` nothing is built either)."""
    from ddpctl.cli import docker_hosts as dh
    from ddpctl.cli import workspace_options
    from ddpctl.local import executor
    from ddpctl.local.plan import plan_local

    if workspace_options.asked_to_build(spec, bake, flag="--bake", source=job_file):
        from ddpctl.images import bake as baking

        if dry_run:
            say(baking.plan_text(spec, "up", push=False, pip=pip, allow_credentials=allow_credentials).rstrip())
            spec = baking.with_image(spec, baking.planned_ref(spec, baking.scan(spec, allow_credentials=allow_credentials)))
        else:
            spec = baking.bake(spec, push=False, pip=pip, allow_credentials=allow_credentials)
    else:
        workspace_options.refuse_unused(pip, spec.workspace.requirements, flag="--bake",
                                        allow_credentials=allow_credentials)
    spec, engine = dh.place(spec)
    several = bool(spec.docker_hosts)  # threads are set in each container there (its CPUs are unknown here)
    plan = plan_local(spec, cwd=Path.cwd(), default_user=caller_user(),
                      host_cpus=None if several else executor.host_cpus(engine))
    return Prepared(spec, engine, plan, several)


@dataclass
class Launched:
    """A started job: the :class:`Job`, and what an attached run needs."""

    job: Job
    prepared: Prepared
    started: Any  # ddpctl.local.executor.Job
    seconds: float


def start(prepared: Prepared, *, detach: bool, resume: bool = False, say: Say = _quiet) -> Launched:
    """Create and start the job's network and containers (all or nothing); one line about it through ``say``."""
    from ddpctl.host_gpus import gpu_count as host_gpu_count
    from ddpctl.local import executor, restarts
    from ddpctl.watch import tensorboard

    plan, spec = prepared.plan, prepared.spec
    if detach and plan.max_restarts:
        raise UsageError(f"--max-restarts {plan.max_restarts} needs an attached 'ddpctl up': it is the process "
                         "that restarts the job, and -d returns at once",
                         "drop -d (keep it running with nohup or tmux), or use --max-restarts 0")
    several = prepared.several
    started = executor.start_job(plan, prepared.engine, several=several, resume=resume, say=say,
                                 host_gpus=0 if several or not plan.wants_gpus else host_gpu_count())
    on = f" on {len(spec.docker_hosts)} Docker host(s)" if several else ""
    where = f"volume {plan.checkpoint_volume}" if plan.checkpoint_volume else "your mount"
    tb_dir = tensorboard.flag_value(plan.containers[0].argv)
    say(f"job {plan.job}: {len(started.job.ids)} node(s){on}, world size {plan.world_size}, image {plan.image}"
        + (f", up to {plan.max_restarts} restart(s), checkpoints in {restarts.CHECKPOINT_DIR} ({where})"
           if plan.max_restarts else "")
        + (", resuming from its checkpoints" if resume else "")
        + (f", TensorBoard event files in {tb_dir} ('ddpctl status {plan.job}' says where and how to look at them)"
           if tb_dir else "")
        + f" (started in {started.seconds:.1f}s)")
    note = restarts.checkpoint_cadence_note(plan.containers[0].argv) if plan.max_restarts else None
    if note:
        say(note)
    job = Job(plan.job, docker_hosts=spec.docker_hosts or None)
    job._engine_cache = prepared.engine
    return Launched(job, prepared, started.job, started.seconds)


def run_attached(launched: Launched, *, rm: bool = False, color: bool = False, out: Any = None, say: Say = _quiet,
                 argv: list[str] | None = None, wait_s: float | None = None) -> Outcome:
    """Stream the job's output to ``out`` until it ends (restarting it after retryable failures with
    ``max_restarts``), keep its output, and say how it ended. Ctrl-C stops and removes it
    (:class:`ddpctl.local.executor.Stopped`)."""
    from ddpctl.local import executor

    plan, engine = launched.prepared.plan, launched.prepared.engine
    finished = executor.run_attached(launched.started, engine, rm=rm, color=color, out=out, say=say, argv=argv,
                                     wait_s=wait_s)
    if not rm:  # with --rm the removal has kept it already
        from ddpctl.watch import history

        kept = history.keep(engine, plan.job)  # 'ddpctl logs/status' read it once the containers are gone
        if kept:
            say(f"job {plan.job}: output kept in {kept}")
    codes = dict(finished.outcome.codes)
    if finished.failure is not None:
        outcome = Outcome.of_failure(plan.job, finished.failure, codes, finished.outcome.summary)
    else:
        again = f" after {finished.restarts} restart(s)" if finished.restarts else ""
        import shlex

        outcome = Outcome(plan.job, 0, f"job {plan.job} finished{again}: all {len(launched.started.ids)} node(s) "
                          "exited 0", "" if rm else f"remove it with '{shlex.join(['ddpctl', 'down', plan.job])}'",
                          codes, finished.outcome.summary)
    launched.job._outcome = outcome
    return outcome


def up(*, command: Sequence[str] | None = None, spec: JobSpec | Mapping[str, Any] | None = None,
       file: str | os.PathLike[str] | None = None, detach: bool = True, resume: bool = False, bake: bool = False,
       **spec_fields: Any) -> Job:
    """Start a job on the local Docker Engine (or on several Docker hosts), as ``ddpctl up`` does.

    ``spec_fields`` are the job spec's keys (``nodes=2``, ``nproc_per_node=2``, ``image=...``, ``env={...}``,
    ``workdir="."``, ``max_restarts=3``, ...), with the same rules and defaults as the job file and the flags of
    ``ddpctl up``; they override ``spec`` (a mapping of those keys, or a :class:`~ddpctl.spec.JobSpec`) or
    ``file`` (a job YAML file). ``command`` is what every process runs (default: ``ddp-train``).

    ``detach=True`` (the default) returns as soon as the containers run. ``detach=False`` streams the job's
    output to ``sys.stdout`` until it ends (restarting it with ``max_restarts``), keeps its output and returns;
    ``job.wait()`` then gives the outcome at once.

    Example::

        >>> job = ddpctl.up(name="demo", nodes=2, command=["ddp-train", "--epochs", "1"])
        >>> job.wait().exit_code
        0
        >>> job.down()

    Raises :class:`ddpctl.BadInput` (nothing is created) for an invalid spec, and
    :class:`ddpctl.DdpctlError` when the engine refuses or fails.
    """
    import sys

    from ddpctl.api.spec_input import job_spec
    from ddpctl.local import executor

    built = job_spec(spec_fields, command=command, spec=spec, file=file)
    env_hosts = os.environ.get(DOCKER_HOSTS_ENV, "").strip()
    if env_hosts and not built.docker_hosts:
        built = job_spec({**spec_fields, "docker_hosts": env_hosts}, command=command, spec=spec, file=file)
    wait_s = executor.engine_wait_s()  # a bad DDPCTL_ENGINE_WAIT is refused before anything starts
    if resume:
        executor.check_resume(built.max_restarts, built.name)
    # the lines 'ddpctl up' prints go to the "ddpctl" logger (logging.basicConfig(level="INFO") shows them)
    prepared = prepare(built, bake=bake, job_file=None if file is None else os.fspath(file), say=log.info)
    launched = start(prepared, detach=detach, resume=resume, say=log.info)
    if not detach:
        try:
            run_attached(launched, out=sys.stdout, say=log.info, wait_s=wait_s)
        except executor.Stopped as stop:
            raise KeyboardInterrupt(f"job {built.name} stopped and removed") from stop
    return launched.job


# ---- a job by its name: status, logs, wait, down


@dataclass(frozen=True)
class Outcome:
    """How a job ended, as ``ddpctl up`` (attached) reports it.

    ``exit_code`` is what the CLI would exit with: 0 when every node exited 0 and the program said it
    finished; a failed node's exit code (1 for one outside 1..255); 69 when a Docker Engine went away for
    good. ``message`` and ``fix`` are its one line (the ``error:`` line of the CLI on a failure).
    """

    job: str
    exit_code: int
    message: str
    fix: str = ""
    node_exit_codes: dict[int, int] = field(default_factory=dict)
    summary: dict | None = None  #: ddp-train's summary record, when it printed one
    rank: int | None = None  #: the rank a failure is blamed on, when its node's launcher named one

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def check(self) -> Outcome:
        """Raise :class:`ddpctl.JobFailed` (with this exit code and line) unless it succeeded; else self."""
        if not self.succeeded:
            exc = JobFailed(self.message, self.fix)
            exc.exit_code = self.exit_code
            raise exc
        return self

    @classmethod
    def of_failure(cls, job: str, failure: JobFailed, codes: dict[int, int], summary: dict | None,
                   rank: int | None = None) -> Outcome:
        return cls(job, failure.exit_code, failure.problem, failure.fix, codes, summary, rank)


@dataclass(frozen=True)
class Removed:
    """What :meth:`Job.down` removed, and where the job's output is kept."""

    job: str
    containers: int
    networks: int
    volumes: int
    kept: Path | None = None
    tensorboard: str | None = None  #: where its TensorBoard event files are kept

    def __bool__(self) -> bool:
        return bool(self.containers or self.networks or self.volumes)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"a job name must be a non-empty string, got {name!r}", "pass e.g. 'ddp'")
    return name


class Job:
    """A job of the local cluster, by name: one started by :func:`up`, :func:`ddpctl.run` or ``ddpctl up``,
    running or ended, or one whose output is kept after ``down``.

    Example::

        >>> job = ddpctl.job("ddp")
        >>> job.status().progress.step
        120
        >>> for line in job.logs(node=0, tail=5):
        ...     print(line)
    """

    def __init__(self, name: str, *, docker_hosts: str | Sequence[str] | None = None) -> None:
        self.name = _check_name(name)
        self.docker_hosts = hosts_flag(docker_hosts)
        self._engine_cache: Engine | None = None
        self._outcome: Outcome | None = None

    def __repr__(self) -> str:
        return f"Job({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and (other.name, other.docker_hosts) == (self.name, self.docker_hosts)

    def __hash__(self) -> int:
        return hash((self.name, self.docker_hosts))

    def _engine(self) -> Engine:
        if self._engine_cache is None:
            self._engine_cache = engine_for(self.docker_hosts)
        return self._engine_cache

    def status(self) -> JobStatus:
        """Where the job stands: the data of ``ddpctl status JOB --json`` as a :class:`ddpctl.JobStatus`."""
        from ddpctl.api.job_status import JobStatus

        return JobStatus.from_dict(status_dict(self.name, self._engine))

    def logs(self, follow: bool = False, node: int | None = None, since: str | float | datetime | timedelta | None = None,
             *, tail: int | None = None, records: bool = False) -> Iterator[str]:
        """The job's output lines, as ``ddpctl logs`` prints them (``node-1 rank-3 | ...``, all nodes merged in
        time order, the ranks' progress records left out unless ``records``). ``follow`` goes on until the
        nodes exit; ``node`` keeps one node; ``since`` keeps newer lines (``"10m"``, a Unix time, a
        :class:`~datetime.datetime` or a :class:`~datetime.timedelta` back from now); ``tail`` the last N
        lines of each node. After ``down`` the kept output."""
        for what, value in (("node", node), ("tail", tail)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise UsageError(f"{what}= must be an integer of at least 0, got {value!r}", f"pass e.g. {what}=0")
        start = since_time(since)
        return log_lines(self.name, self._engine, follow=follow, node=node, tail=tail, since=start, records=records)

    def wait(self, timeout: float | None = None, *, stop_on_failure: bool = True, poll_s: float = 1.0) -> Outcome:
        """Block until every node has exited (at most ``timeout`` seconds: then :class:`TimeoutError`), and
        return the :class:`ddpctl.Outcome` with the exit code ``ddpctl up`` would return. As an attached
        ``ddpctl up`` does, the first node that fails gets a few seconds to report, then the other nodes are
        stopped (``stop_on_failure=False`` leaves them running to their own end). A job that is gone
        (``down``) is read from its kept output."""
        if self._outcome is not None:
            return self._outcome
        if timeout is not None and timeout < 0:
            raise UsageError(f"timeout= must be at least 0, got {timeout}", "pass e.g. timeout=600")
        engine = self._engine()
        nodes, stopped = wait_for_exit(engine, self.name, timeout, stop_on_failure=stop_on_failure, poll_s=poll_s)
        return node_outcome(engine, self.name, nodes, stopped) if nodes else kept_outcome(self.name)

    def down(self) -> Removed:
        """Stop and remove the job's containers, network and checkpoint volume, as ``ddpctl down`` does (its
        output is kept first: :meth:`status`, :meth:`logs` and :meth:`wait` still read it). Safe to repeat."""
        return remove(self._engine(), self.name)


def job(name: str, *, docker_hosts: str | Sequence[str] | None = None) -> Job:
    """The job called ``name``: running, ended, or kept after ``down``.

    Example::

        >>> ddpctl.job("ddp").status().state
        'running'

    Raises :class:`ddpctl.BadInput` when no such job has containers or kept output.
    """
    from ddpctl.watch import history

    found = Job(name, docker_hosts=docker_hosts)
    if history.find(found.name) is None and not current_nodes(found._engine(), found.name):
        raise UsageError(f"no job {name}: no containers and no kept output in {history.root()}",
                         "list jobs with ddpctl.jobs() or 'ddpctl ps --all'")
    return found


def jobs(*, docker_hosts: str | Sequence[str] | None = None, kept: bool = True) -> list[Job]:
    """Every job: those with containers (``ddpctl ps``) and, with ``kept``, those whose output is kept after
    they went down (``ddpctl ps --all``); sorted by name."""
    from ddpctl.local import executor
    from ddpctl.watch import history

    engine = engine_for(docker_hosts)
    names = {r.job for r in executor.list_nodes(engine)}
    if kept:
        names |= {k.meta.get("job") or k.folder.name for k in history.all_kept()}
    out = []
    for name in sorted(names):
        j = Job(name, docker_hosts=docker_hosts)
        j._engine_cache = engine
        out.append(j)
    return out


# ---- the implementations the CLI shares


def status_dict(name: str, engine: Engine | Callable[[], Engine]) -> dict:
    """The dict of ``ddpctl status JOB --json``: the job's containers, else its kept output."""
    from ddpctl.errors import EngineError
    from ddpctl.watch import history, sources, status

    try:
        view = sources.docker_view(engine() if callable(engine) else engine, name)
    except EngineError:
        if history.find(name) is None:
            raise
        view = None  # no engine answers: the kept output still says how the job ended
    if view is None:
        view = sources.job_view(None, name)
    return status.build(view, time.time())


_SINCE = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def since_time(value: str | float | datetime | timedelta | None, *, flag: str = "since=") -> float | None:
    """A Unix time from ``--since``'s forms (30s, 10m, 2h, 1d, a Unix time), a datetime or a timedelta."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, timedelta):
        return time.time() - value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = _SINCE.fullmatch(value.strip()) if isinstance(value, str) else None
    if not m:
        raise UsageError(f"{flag} {value!r} is not a duration such as 30s, 10m, 2h or a Unix time",
                         f"write e.g. {flag}{'10m' if flag.endswith('=') else ' 10m'}")
    number, unit = float(m.group(1)), m.group(2)
    if not unit and number > 1e9:
        return number  # a Unix time
    return time.time() - number * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


def log_lines(name: str, engine: Engine | Callable[[], Engine], *, follow: bool = False, node: int | None = None,
              tail: int | None = None, since: float | None = None, records: bool = False, color: bool = False,
              say: Say = _quiet) -> Iterator[str]:
    """``ddpctl logs``'s lines (prefixed with node and rank); notes (silent ranks, kept output) through ``say``."""
    from ddpctl.local import executor
    from ddpctl.watch.records import is_record

    eng = engine() if callable(engine) else engine
    try:
        nodes = executor.job_nodes(eng, name, node)
    except UsageError:
        kept = _kept_lines(name, node, tail, since, records, color, say)
        if kept is None:
            raise
        yield from kept
        return
    expected = {n: executor.node_ranks(info.command) for n, info in nodes.items()}
    world = max([r.stop for r in expected.values() if r] or [1])
    width = executor.label_width(max(nodes) + 1, world)
    seen: dict[int, set[int]] = {n: set() for n in nodes}
    source = (executor.follow_logs(eng, name, node=node, tail=tail, since=since, say=say) if follow
              else executor.merged_logs(eng, name, node=node, tail=tail, since=since))
    for n, line in source:
        r, text = executor.split_rank(line)
        if r is not None:
            seen[n].add(r)
        if not records and is_record(text):
            continue
        yield executor.prefix(n, width, color, r) + text
    for n in sorted(nodes):
        note = executor.silent_ranks_line(n, expected[n], seen[n], window=tail is not None or since is not None)
        if note:
            say(note)


def _kept_lines(name: str, node, tail, start, records: bool, color: bool, say: Say) -> list[str] | None:
    """``logs`` of a job that is gone: its kept output (the last attempt), as the containers gave it."""
    from ddpctl.local import executor
    from ddpctl.watch import history
    from ddpctl.watch.records import is_record, stamp_seconds

    kept = history.find(name)
    if kept is None:
        return None
    last = max((a for a, _ in kept.lines), default=0)
    picked: dict[int, list[tuple[str, str]]] = {}
    for (a, n), lines in kept.lines.items():
        if a == last and (node is None or n == node):
            sel = [ln for ln in lines if start is None or (stamp_seconds(ln[0]) or 0) >= start]
            picked[n] = sel[-tail:] if tail else ([] if tail == 0 else sel)
    if node is not None and node not in picked:
        return None
    entries = sorted((s, n, t) for n, ls in picked.items() for s, t in ls)
    world = int(kept.meta.get("world_size") or 0)
    width = executor.label_width(max(picked, default=0) + 1, max(world, len(picked)))
    out = []
    for _, n, text in entries:
        r, body = executor.split_rank(text)
        if records or not is_record(body):
            out.append(executor.prefix(n, width, color, r) + body)
    say(f"job {name} is gone: its output as kept in {kept.folder}")
    return out


def remove(engine: Engine, name: str) -> Removed:
    """``ddpctl down JOB``: containers, network and checkpoint volume removed, the output kept first."""
    from ddpctl.local import executor
    from ddpctl.watch import history

    n_c, n_n, n_v = executor.remove_job(engine, name)
    kept = history.find(name) if n_c else None
    tb = (kept.meta.get("tensorboard") or {}) if kept else {}
    return Removed(name, n_c, n_n, n_v, kept.folder if kept else None, tb.get("kept") or tb.get("host_path"))


def current_nodes(engine: Engine, name: str) -> dict[int, ContainerInfo]:
    """The job's containers of its newest attempt, by node; {} when it has none."""
    from ddpctl.local import executor
    from ddpctl.watch import history

    try:
        found = executor.job_nodes(engine, name)
    except UsageError:
        return {}
    last = max(history.attempt_of(c.labels) for c in found.values())
    return {n: c for n, c in found.items() if history.attempt_of(c.labels) == last}


def wait_for_exit(engine: Engine, name: str, timeout: float | None, *, stop_on_failure: bool = True,
                  poll_s: float = 1.0) -> tuple[dict[int, ContainerInfo], set[int]]:
    """Poll until none of the job's nodes runs; the nodes then ({} when the job has no containers) and those
    stopped here. With
    ``stop_on_failure``, the others are stopped once a node failed and had its grace to report (the attached
    ``up``'s rule: :data:`ddpctl.local.executor.PEER_GRACE_S`)."""
    from ddpctl.local import executor

    deadline = None if timeout is None else time.monotonic() + timeout
    stop_at: float | None = None
    stopped: set[int] = set()
    while True:
        nodes = current_nodes(engine, name)
        running = [n for n, c in nodes.items() if c.running or c.state == "created"]
        if not running:
            return nodes, stopped
        if stop_on_failure and stop_at is None and any(
                not (c.running or c.state == "created") and c.exit_code not in (0, None) for c in nodes.values()):
            stop_at = time.monotonic() + executor.PEER_GRACE_S
        if stop_at is not None and time.monotonic() >= stop_at:
            for n in running:
                stopped.add(n)
                try:
                    engine.stop(nodes[n].id, 5)
                except Exception:  # noqa: BLE001 - gone meanwhile, or stopping: the next poll sees it
                    pass
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"job {name} still runs after {timeout} s")
        time.sleep(poll_s if left is None else max(0.0, min(poll_s, left)))


def node_outcome(engine: Engine, name: str, nodes: dict[int, ContainerInfo],
                 stopped: AbstractSet[int] = frozenset()) -> Outcome:
    """The outcome of a job whose nodes all exited (``stopped``: those stopped after the first failure): the
    root cause of a failure as the attached ``up`` names it, else whether the program said it finished."""
    import shlex

    from ddpctl.local import executor
    from ddpctl.local.executor import attach, ending
    from ddpctl.local.executor.common import split_lines

    codes = {n: (c.exit_code if c.exit_code is not None else 1) for n, c in sorted(nodes.items())}
    failed = sorted((n for n, code in codes.items() if code != 0), key=lambda n: (n in stopped, n))
    if failed:
        found = []
        for n in failed:
            try:
                found.append(executor.node_failure(engine, n, nodes[n].id, codes[n], stopped=n in stopped))
            except Exception:  # noqa: BLE001 - the logs are gone: still name the node and its code
                found.append(executor.NodeFailure(n, codes[n], secondary=n in stopped))
        cause = executor.root_cause(found)
        failure = executor.failure_message(name, cause.node, cause.exit_code, nodes[cause.node], cause)
        return Outcome.of_failure(name, failure, codes, None, cause.rank)
    seen = executor.Outcome(dict(codes), None)
    for _, c in sorted(nodes.items()):
        try:
            for line in split_lines(engine.logs(c.id, tail=200)):
                attach.read_line(seen, executor.split_rank(line)[1])
        except Exception:  # noqa: BLE001 - removed meanwhile: judged on what was read
            pass
    not_done = ending.program_finished(name, list(nodes[min(nodes)].command), len(nodes), seen)
    if not_done is not None:
        return Outcome.of_failure(name, not_done, codes, seen.summary)
    return Outcome(name, 0, f"job {name} finished: all {len(nodes)} node(s) exited 0",
                   f"remove it with '{shlex.join(['ddpctl', 'down', name])}'", codes, seen.summary)


def kept_outcome(name: str) -> Outcome:
    """The outcome of a job that is gone, from its kept output."""
    from ddpctl.local import executor
    from ddpctl.watch import history, records

    kept = history.find(name)
    if kept is None:
        raise UsageError(f"no job {name}: no containers and no kept output in {history.root()}",
                         "list jobs with ddpctl.jobs() or 'ddpctl ps --all'")
    codes = {int(n): int(c) for n, c in (kept.meta.get("exit_codes") or {}).items()
             if str(n).isdigit() and isinstance(c, int)}
    _, summary = records.collect(kept.texts())
    result = kept.meta.get("result")
    failed = sorted(n for n, c in codes.items() if c != 0)
    if result == "succeeded" and not failed:
        return Outcome(name, 0, f"job {name} finished: all {len(codes)} node(s) exited 0 (kept in {kept.folder})",
                       "", codes, summary)
    if failed:
        last = max((a for a, _ in kept.lines), default=0)
        texts = [t for _, t in kept.lines.get((last, failed[0]), [])]
        found = executor.parse_launch_failure(texts[-40:])
        cause = None if found is None else executor.NodeFailure(failed[0], codes[failed[0]], found[0], found[3])
        failure = executor.failure_message(name, failed[0], codes[failed[0]], None, cause)
        return Outcome.of_failure(name, failure, codes, summary)
    exc = JobFailed(f"job {name} was {result or 'stopped'} before it ended (kept in {kept.folder})",
                    "start it again")
    return Outcome.of_failure(name, exc, codes, summary)
