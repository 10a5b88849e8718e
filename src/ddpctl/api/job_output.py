"""A job's output and containers, by name: ``ddpctl status``'s dict, ``ddpctl logs``'s lines, ``ddpctl down``
(what :class:`ddpctl.Job` and the CLI share), and the nodes of its newest attempt."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ddpctl.errors import UsageError

if TYPE_CHECKING:
    from ddpctl.local.engine_interface import ContainerInfo, Engine

Say = Callable[[str], None]


def say_nothing(_: str) -> None:
    pass


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



def status_dict(name: str, engine: Engine | Callable[[], Engine]) -> dict:
    """The dict of ``ddpctl status JOB --json``: the job's containers, else its kept output."""
    from ddpctl.errors import EngineError
    from ddpctl.joboutput import kept_output
    from ddpctl.watch import sources, status

    try:
        view = sources.docker_view(engine() if callable(engine) else engine, name)
    except EngineError:
        if kept_output.find(name) is None:
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
              say: Say = say_nothing, raw: bool = False) -> Iterator[str]:
    """``ddpctl logs``'s lines (prefixed with node and rank; control characters made visible unless ``raw``);
    notes (silent ranks, kept output) through ``say``."""
    from ddpctl.joboutput.records import is_record
    from ddpctl.joboutput.visible import visible
    from ddpctl.local import executor

    eng = engine() if callable(engine) else engine
    try:
        nodes = executor.job_nodes(eng, name, node)
    except UsageError:
        kept = _kept_lines(name, node, tail, since, records, color, say, raw)
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
        yield executor.prefix(n, width, color, r) + (text if raw else visible(text, tab=True))
    for n in sorted(nodes):
        note = executor.silent_ranks_line(n, expected[n], seen[n], window=tail is not None or since is not None)
        if note:
            say(note)


def _kept_lines(name: str, node, tail, start, records: bool, color: bool, say: Say,
                raw: bool = False) -> list[str] | None:
    """``logs`` of a job that is gone: its kept output (the last attempt), as the containers gave it."""
    from ddpctl.joboutput import kept_output
    from ddpctl.joboutput.records import is_record, stamp_seconds
    from ddpctl.joboutput.visible import visible
    from ddpctl.local import executor

    kept = kept_output.find(name)
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
            out.append(executor.prefix(n, width, color, r) + (body if raw else visible(body, tab=True)))
    say(f"job {name} is gone: its output as kept in {kept.folder}")
    return out


def remove(engine: Engine, name: str) -> Removed:
    """``ddpctl down JOB``: containers, network and checkpoint volume removed, the output kept first."""
    from ddpctl.joboutput import kept_output
    from ddpctl.local import executor

    n_c, n_n, n_v = executor.remove_job(engine, name)
    kept = kept_output.find(name) if n_c else None
    tb = (kept.meta.get("tensorboard") or {}) if kept else {}
    return Removed(name, n_c, n_n, n_v, kept.folder if kept else None, tb.get("kept") or tb.get("host_path"))


def current_nodes(engine: Engine, name: str) -> dict[int, ContainerInfo]:
    """The job's containers of its newest attempt, by node; {} when it has none."""
    from ddpctl.joboutput import kept_output
    from ddpctl.local import executor

    try:
        found = executor.job_nodes(engine, name)
    except UsageError:
        return {}
    last = max(kept_output.attempt_of(c.labels) for c in found.values())
    return {n: c for n, c in found.items() if kept_output.attempt_of(c.labels) == last}


