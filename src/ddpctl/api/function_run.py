"""``ddpctl.run(fn, *args)``: a Python function of the caller's session on every rank of a job, each rank's
return value back in rank order.

The function and its arguments travel serialised by cloudpickle (a function defined in ``__main__`` or a notebook
cell, a lambda and a closure travel by value; one from an importable module by reference, so the image must have
that module). They are written to a private run directory on this machine that every container mounts at the same
path; each rank runs :mod:`ddpctl.api.remote_call` under torchrun (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT`` set: ``torch.distributed.init_process_group()`` is the one call to a process
group) and writes its record there. The job is removed when the call returns or raises; its output is kept
(``ddpctl.job(name).logs()``).

The values come back unpickled: run only images and functions you trust, as with any pickle.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

from ddpctl.errors import DdpctlError, UsageError

RUN_DIR = "/ddpctl-run"  # where every container mounts the run directory
MAX_RECORD_BYTES = 2 * 1024**3  # a rank's record (its pickled return value) read back at most


class RemoteError(DdpctlError):
    """A rank of :func:`ddpctl.run` raised, was killed, or returned a value that cannot be serialised.

    ``rank`` is the rank (None when the failure is no single rank's), ``remote_type`` the exception's type
    (``builtins.ValueError``), ``remote_traceback`` the traceback as the rank printed it, ``exception`` the
    exception itself when it could travel back, and ``job`` the job's name (its output stays readable with
    ``ddpctl.job(job).logs()``).
    """

    exit_code = 1

    def __init__(self, problem: str, fix: str = "", *, rank: int | None = None, job: str = "",
                 remote_type: str = "", remote_traceback: str = "", exception: BaseException | None = None) -> None:
        super().__init__(problem, fix)
        self.rank = rank
        self.job = job
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        self.exception = exception
        if remote_traceback and hasattr(self, "add_note"):
            self.add_note(f"traceback of rank {rank}:\n{remote_traceback.rstrip()}")


def _serialise(fn: Callable[..., Any], args: tuple) -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps((fn, args))
    except Exception as exc:  # noqa: BLE001 - any reason the call cannot be pickled
        raise UsageError(f"the function or its arguments cannot be serialised ({type(exc).__name__}: "
                         f"{str(exc)[:200]})", "pass plain data (numbers, strings, lists, dicts, arrays) and open "
                         "files, locks or connections inside the function") from None


def _prepare_dir(fn: Callable[..., Any], args: tuple) -> Path:
    from importlib.resources import files

    payload = _serialise(fn, args)
    directory = Path(tempfile.mkdtemp(prefix="ddpctl-run-"))  # mode 0700, the caller's: the ranks run as the caller
    try:
        (directory / "results").mkdir()
        (directory / "call.pkl").write_bytes(payload)
        (directory / "meta.json").write_text(json.dumps({"python": list(sys.version_info[:2])}))
        program = files("ddpctl.api").joinpath("remote_call.py").read_text(encoding="utf-8")
        (directory / "remote_call.py").write_text(program, encoding="utf-8")
        directory.chmod(0o700)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory


def _read_record(path: Path) -> dict | None:
    import pickle

    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size > MAX_RECORD_BYTES:
        return {"kind": "unserialisable", "type": "", "message": f"its pickled value is {size} bytes, over the "
                f"{MAX_RECORD_BYTES} bytes ddpctl.run reads back", "traceback": "", "exception": None}
    with open(path, "rb") as f:
        record = pickle.load(f)  # noqa: S301 - the caller's own function wrote it (see the module's note)
    return record if isinstance(record, dict) else None


def _failure(name: str, world: int, records: dict[int, dict | None], outcome) -> RemoteError | None:
    """The one error of a run, or None: the rank the job's failure is blamed on, else the first rank (in time)
    that raised, else a value that cannot be serialised, else a rank that ended without a record."""
    import pickle

    def raised(rank: int, rec: dict) -> RemoteError:
        exc = None
        if rec.get("exception"):
            try:
                exc = pickle.loads(rec["exception"])  # noqa: S301 - see the module's note
            except Exception:  # noqa: BLE001 - the type and text travel anyway
                exc = None
        kind = rec.get("kind")
        rtype = str(rec.get("type") or "")
        text = " ".join(str(rec.get("message") or "").split())[:300]
        if kind == "unserialisable":
            return RemoteError(f"rank {rank} of ddpctl.run returned a value that cannot be serialised ({rtype}: "
                               f"{text})", "return plain data (numbers, strings, lists, dicts; tensors with "
                               ".cpu()), not open files, locks, generators or connections", rank=rank, job=name,
                               remote_type=rtype)
        if kind in ("setup", "load"):
            fix = ("use an image with the caller's Python" if rtype == "PythonVersionMismatch" else
                   "install cloudpickle in the image" if kind == "setup" else
                   "define the function in __main__ (a script or notebook) or install its module in the image")
            return RemoteError(f"rank {rank} of ddpctl.run could not load the function: {rtype}: {text}", fix,
                               rank=rank, job=name, remote_type=rtype, remote_traceback=str(rec.get("traceback") or ""))
        short = rtype.removeprefix("builtins.")
        return RemoteError(f"rank {rank} of ddpctl.run raised {short}: {text}" if text else
                           f"rank {rank} of ddpctl.run raised {short}", "its traceback is in .remote_traceback",
                           rank=rank, job=name, remote_type=rtype, remote_traceback=str(rec.get("traceback") or ""),
                           exception=exc)

    errors = {r: rec for r, rec in records.items() if rec is not None and rec.get("kind") != "value"}
    missing = [r for r in range(world) if records.get(r) is None]
    failed = outcome is not None and not outcome.succeeded
    if failed and outcome.rank is not None:
        rec = records.get(outcome.rank)
        if rec is not None and rec.get("kind") != "value":
            return raised(outcome.rank, rec)
        if rec is None:
            return RemoteError(f"rank {outcome.rank} of ddpctl.run ended without returning: {outcome.message}",
                               f"see ddpctl.job({name!r}).logs()", rank=outcome.rank, job=name)
    raisers = sorted((rec.get("time") or 0.0, r) for r, rec in errors.items() if rec.get("kind") != "unserialisable")
    if raisers:
        return raised(raisers[0][1], errors[raisers[0][1]])
    if errors:
        r = min(errors)
        return raised(r, errors[r])
    if missing:
        why = outcome.message if failed else "it wrote no result"
        return RemoteError(f"rank {missing[0]} of ddpctl.run ended without returning: {why}",
                           f"see ddpctl.job({name!r}).logs()", rank=missing[0], job=name)
    if failed:
        return RemoteError(f"ddpctl.run: {outcome.message}", outcome.fix, job=name)
    return None


def run(fn: Callable[..., Any], *args: Any, nodes: int = 2, nproc_per_node: int = 1, image: str | None = None,
        timeout: float | None = None, **spec_fields: Any) -> list[Any]:
    """Run ``fn(*args)`` on every rank of a new job and return each rank's return value, in rank order.

    The job has ``nodes`` containers of ``nproc_per_node`` processes each (``WORLD_SIZE = nodes *
    nproc_per_node``), on ``image`` (default: the job spec's default image); ``spec_fields`` are any other keys
    of the job spec (``env={...}``, ``cpus_per_node=2``, ``name="..."``, ``gpus_per_node=1``, ...). Each rank has
    ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its environment, so a process
    group is one call away: ``torch.distributed.init_process_group("gloo")`` (or ``"nccl"``).

    Example::

        >>> def where():
        ...     import os
        ...     return os.environ["RANK"], os.environ["WORLD_SIZE"]
        >>> ddpctl.run(where, nodes=2)
        [('0', '2'), ('1', '2')]

    An exception on a rank is raised here as :class:`ddpctl.RemoteError` naming the rank, with the remote
    traceback (``.remote_traceback``, also shown as a note) and the exception itself (``.exception``) when it
    could travel back; a rank that is killed, or returns a value that cannot be serialised, is one
    :class:`ddpctl.RemoteError` too. The job is removed at the end (``timeout`` seconds at most: then
    :class:`TimeoutError`); its output is kept, ``ddpctl.job(error.job).logs()`` shows it.

    The function travels by value when it is defined in ``__main__`` (a script, a notebook), as a lambda or a
    closure; a function of an importable module travels by reference, so the image must have its module. The
    image's Python must be the caller's (``X.Y``); the ddpctl images carry cloudpickle, another image needs it.
    """
    from ddpctl.api import jobs as jobs_api
    from ddpctl.api.spec_input import job_spec

    if not callable(fn):
        raise UsageError(f"ddpctl.run needs a function, got {type(fn).__name__}", "pass e.g. ddpctl.run(train, 1e-3)")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"timeout= must be above 0, got {timeout}", "pass e.g. timeout=600")
    for key in ("command", "docker_hosts", "max_restarts"):
        if spec_fields.get(key):
            raise UsageError(f"ddpctl.run does not take {key}=", {
                "command": "the function is what every rank runs; use ddpctl.up(command=[...]) for a program",
                "docker_hosts": "the ranks read the function from a directory on this machine: run on this "
                                "machine's Docker Engine (ddpctl.up takes docker_hosts)",
                "max_restarts": "a function call is not restarted; catch the failure and call again",
            }[key])
    if os.environ.get(jobs_api.DOCKER_HOSTS_ENV, "").strip():
        raise UsageError(f"ddpctl.run runs on this machine's Docker Engine, but ${jobs_api.DOCKER_HOSTS_ENV} names "
                         "Docker hosts", f"unset {jobs_api.DOCKER_HOSTS_ENV} for this call")
    name = spec_fields.pop("name", None) or f"run-{uuid.uuid4().hex[:8]}"
    volumes = list(spec_fields.pop("volumes", None) or [])
    fields = {**spec_fields, "name": name, "nodes": nodes, "nproc_per_node": nproc_per_node, "image": image}
    # the spec is checked before anything is written or started
    spec = job_spec({**fields, "volumes": volumes}, command=["python", f"{RUN_DIR}/remote_call.py", RUN_DIR])
    directory = _prepare_dir(fn, args)
    try:
        spec = job_spec({**fields, "volumes": [*volumes, f"{directory}:{RUN_DIR}"]},
                        command=["python", f"{RUN_DIR}/remote_call.py", RUN_DIR])
        prepared = jobs_api.prepare(spec)
        jobs_api.start(prepared, detach=True)
        engine = prepared.engine
        try:
            try:
                nodes_now, stopped = jobs_api.wait_for_exit(engine, name, timeout, poll_s=0.5)
            except TimeoutError:
                raise TimeoutError(f"ddpctl.run: job {name} still ran after {timeout} s; it is removed") from None
            outcome = jobs_api.node_outcome(engine, name, nodes_now, stopped) if nodes_now else None
        finally:
            jobs_api.remove(engine, name)
        world = prepared.plan.world_size
        records = {r: _read_record(directory / "results" / f"rank-{r}.pkl") for r in range(world)}
        error = _failure(name, world, records, outcome)
        if error is not None:
            raise error
        import pickle

        return [pickle.loads(records[r]["value"]) for r in range(world)]  # type: ignore[index]  # noqa: S301
    finally:
        shutil.rmtree(directory, ignore_errors=True)
