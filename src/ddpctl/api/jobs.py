"""``ddpctl.up``, :class:`Job` (status, logs, wait, down), ``ddpctl.job`` and ``ddpctl.jobs``: the local cluster
from Python, and the one implementation of ``ddpctl up | status | logs | down`` (the CLI parses, calls the
functions here and prints).

A job is found by its name, through the labels of its containers (``ddpctl.job("ddp")`` needs no state), and
once it is gone through the output ``ddpctl`` keeps (:mod:`ddpctl.joboutput.kept_output`).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ddpctl.api.job_outcome import Outcome, kept_outcome, node_outcome, wait_for_exit
from ddpctl.api.job_output import (
    Removed,
    check_count,
    current_nodes,
    log_lines,
    remove,
    since_time,
    status_dict,
)
from ddpctl.api.job_start import Launched, Prepared, caller_user, prepare, run_attached, start
from ddpctl.errors import UsageError

if TYPE_CHECKING:
    from ddpctl.api.job_status import JobStatus
    from ddpctl.local.engine_interface import Engine
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
    """The engine of a job's commands (ps, logs, down, status): the hosts given (``--docker-hosts``; default
    ``$DDPCTL_DOCKER_HOSTS``) as one, else DOCKER_HOST's engine."""
    from ddpctl.dockerengine import job_engine

    flag = hosts_flag(docker_hosts)
    return job_engine.for_hosts(flag if flag is not None else os.environ.get(job_engine.DOCKER_HOSTS_ENV))


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
    job = Job(prepared.plan.job, docker_hosts=prepared.spec.docker_hosts or None)
    job._engine_cache = prepared.engine
    if not detach:
        try:
            job._outcome = run_attached(launched, out=sys.stdout, say=log.info, wait_s=wait_s)
        except executor.Stopped as stop:
            raise KeyboardInterrupt(f"job {built.name} stopped and removed") from stop
    return job


# ---- a job by its name: status, logs, wait, down


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
             *, tail: int | None = None, records: bool = False, raw: bool = False) -> Iterator[str]:
        """The job's output lines, as ``ddpctl logs`` prints them (``node-1 rank-3 | ...``, all nodes merged in
        time order, the ranks' progress records left out unless ``records``). ``follow`` goes on until the
        nodes exit; ``node`` keeps one node; ``since`` keeps newer lines (``"10m"``, a Unix time, a
        :class:`~datetime.datetime` or a :class:`~datetime.timedelta` back from now); ``tail`` the last N
        lines of each node. After ``down`` the kept output. Control characters the job printed (terminal
        escapes) are shown as text such as ``\x1b``; ``raw`` gives the text as the job printed it."""
        for what, value in (("node=", node), ("tail=", tail)):
            check_count(what, value)
        start = since_time(since)
        return log_lines(self.name, self._engine, follow=follow, node=node, tail=tail, since=start, records=records,
                         raw=raw)

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
    from ddpctl.joboutput import kept_output

    found = Job(name, docker_hosts=docker_hosts)
    if kept_output.find(found.name, with_lines=False) is None and not current_nodes(found._engine(), found.name):
        raise UsageError(f"no job {name}: no containers and no kept output in {kept_output.root()}",
                         "list jobs with ddpctl.jobs() or 'ddpctl ps --all'")
    return found


def jobs(*, docker_hosts: str | Sequence[str] | None = None, kept: bool = True) -> list[Job]:
    """Every job: those with containers (``ddpctl ps``) and, with ``kept``, those whose output is kept after
    they went down (``ddpctl ps --all``); sorted by name."""
    from ddpctl.joboutput import kept_output
    from ddpctl.local import executor

    engine = engine_for(docker_hosts)
    names = {r.job for r in executor.list_nodes(engine)}
    if kept:
        names |= {k.meta.get("job") or k.folder.name for k in kept_output.all_kept()}
    out = []
    for name in sorted(names):
        j = Job(name, docker_hosts=docker_hosts)
        j._engine_cache = engine
        out.append(j)
    return out



__all__ = ["Job", "Launched", "Outcome", "Prepared", "Removed", "caller_user", "current_nodes", "engine_for",
           "hosts_flag", "job", "jobs", "kept_outcome", "log_lines", "node_outcome", "prepare", "remove",
           "run_attached", "since_time", "start", "status_dict", "up", "wait_for_exit"]
