"""The typed form of ``ddpctl status --json``: :class:`JobStatus` with its :class:`NodeStatus`,
:class:`RankStatus` and :class:`Progress`. Each is read from the status dict by its field names (a key the dict
lacks is None), and ``JobStatus.to_dict()`` gives that dict back unchanged."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


def _pick(cls: type[T], data: Mapping[str, Any]) -> T:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{n: data.get(n) for n in names})


@dataclass(frozen=True)
class NodeStatus:
    """One node (container) of the job."""

    node: int
    state: str  #: running | exited | created | ...
    exit_code: int | None
    restarts: int | None
    container: str | None
    host: str | None  #: the Docker host, when the job spans several
    last_output_age_s: float | None  #: seconds since its newest output line


@dataclass(frozen=True)
class RankStatus:
    """One rank's progress, from the newest progress record it wrote."""

    rank: int
    node: int | None
    host: str | None
    restart: int | None
    step: int
    total: int | None
    percent: float | None
    epoch: int | None
    samples_per_sec: float | None
    step_time_s: float | None
    loss: float | None
    lr: float | None
    gpu_util: float | None
    gpu_mem_gb: float | None
    eta_s: float | None
    checkpoint: dict | None
    time: float | None
    records: int | None
    slowest: bool | None  #: the rank that holds the job back


@dataclass(frozen=True)
class Progress:
    """The job's line: its slowest rank's step and ETA, the ranks' median rate, the newest checkpoint."""

    step: int
    total: int | None
    percent: float | None
    samples_per_sec: float | None
    eta_s: float | None
    loss: float | None
    checkpoint: dict | None
    restart: int | None
    slowest_rank: int | None


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands: ``ddpctl status JOB --json`` as an object.

    ``state`` is ``running`` while a node runs; ``result`` is ``succeeded`` or ``failed`` (or ``stopped``) once it
    ended, else None. ``source`` says where it was read: ``docker`` (its containers) or ``kept`` (its output kept
    after ``down``).
    """

    job: str
    source: str
    state: str
    result: str | None
    restarts: int
    nodes: tuple[NodeStatus, ...]
    ranks: tuple[RankStatus, ...]
    progress: Progress | None
    records_seen: bool
    summary: dict | None  #: ddp-train's summary record (summary.schema.json), when it printed one
    kept: str | None  #: the folder its output is kept in
    tensorboard: dict | None
    #: lines that looked like progress records or summaries but failed their schema (shown as plain output)
    records_rejected: int = 0
    #: what the bounded read of the output left out (lines cut, output not read), one line each
    notes: tuple[str, ...] = ()
    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobStatus:
        progress = data.get("progress")
        return cls(
            job=str(data.get("job")), source=str(data.get("source")), state=str(data.get("state")),
            result=data.get("result"), restarts=int(data.get("restarts") or 0),
            nodes=tuple(_pick(NodeStatus, n) for n in data.get("nodes") or ()),
            ranks=tuple(_pick(RankStatus, r) for r in data.get("ranks") or ()),
            progress=_pick(Progress, progress) if isinstance(progress, Mapping) else None,
            records_seen=bool(data.get("records_seen")), summary=data.get("summary"), kept=data.get("kept"),
            tensorboard=data.get("tensorboard"), records_rejected=int(data.get("records_rejected") or 0),
            notes=tuple(str(n) for n in data.get("notes") or ()), raw=dict(data))

    def to_dict(self) -> dict:
        """The dict ``ddpctl status --json`` prints."""
        return dict(self.raw)
