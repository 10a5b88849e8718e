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
        if kept_output.find(name, with_lines=False) is None:
            raise
        view = None  # no engine answers: the kept output still says how the job ended
    if view is None:
        view = sources.job_view(None, name)
    return status.build(view, time.time())


_SINCE = re.compile(r"(\d{1,12}(?:\.\d{1,9})?)([smhd]?)")
MAX_SINCE_S = 100 * 365 * 86400  # --since: a duration of at most 100 years
MAX_UNIX_TIME = 4102444800.0  # --since: a Unix time before 2100-01-01
MAX_TAIL = 10_000_000  # --tail: lines per node
MAX_NODE = 100_000  # --node: a node rank


def since_time(value: str | float | datetime | timedelta | None, *, flag: str = "since=") -> float | None:
    """A Unix time from ``--since``'s forms (30s, 10m, 2h, 1d, a Unix time), a datetime or a timedelta; a
    duration of at most 100 years, a Unix time before 2100 (anything else: one-line error)."""
    if value is None:
        return None
    eg = f"write e.g. {flag}{'10m' if flag.endswith('=') else ' 10m'}"
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, timedelta):
        value = value.total_seconds()
        if not 0 <= value <= MAX_SINCE_S:
            raise UsageError(f"{flag} {value!r} seconds back is not between 0 and 100 years", eg)
        return time.time() - value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0 <= value <= MAX_UNIX_TIME:  # also NaN
            raise UsageError(f"{flag} {value!r} is not a Unix time between 0 and {MAX_UNIX_TIME:.0f} (2100)", eg)
        return float(value)
    text = value.strip() if isinstance(value, str) else None
    m = _SINCE.fullmatch(text) if text is not None and len(text) <= 32 else None
    if not m:
        shown = repr(value[:40] + "..." if isinstance(value, str) and len(value) > 40 else value)
        raise UsageError(f"{flag} {shown} is not a duration such as 30s, 10m, 2h (at most 100 years) or a "
                         "Unix time", eg)
    number, unit = float(m.group(1)), m.group(2)
    if not unit and number > 1e9:
        if number > MAX_UNIX_TIME:
            raise UsageError(f"{flag} {value!r} is a Unix time after 2100", eg)
        return number  # a Unix time
    seconds = number * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if seconds > MAX_SINCE_S:
        raise UsageError(f"{flag} {value!r} is more than 100 years back", eg)
    return time.time() - seconds


def check_count(what: str, value: int | None) -> None:
    """``--tail``/``--node`` (``tail=``/``node=``): None or a whole number from 0 to its bound."""
    bound = MAX_TAIL if what.strip("-=").startswith("tail") else MAX_NODE
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
        big = isinstance(value, int) and abs(value) > 10**40
        shown = f"a number of about {int(value.bit_length() * 0.30103)} digits" if big else repr(value)[:40]
        raise UsageError(f"{what} must be a whole number from 0 to {bound:,}, got {shown}",
                         f"pass e.g. {what}{'' if what.endswith('=') else ' '}20")


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

    kept = kept_output.find(name, tail=tail or None)  # --tail N: only each node's last N lines are read
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
    kept = kept_output.find(name, with_lines=False) if n_c else None  # where, not what: memory stays flat
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


