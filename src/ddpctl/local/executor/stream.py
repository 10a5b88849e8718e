"""The background side of an attached job or a followed log: log pumps, the engine heartbeat, and the bounded
wait for an engine that went away.

No thread here ever raises: each hands what it found (a line, an exit code, a lost connection) to the main flow
through one queue, and the main flow decides (:mod:`.attach`, :func:`follow`). The events:

- ``("line", rank, text, stamp)``: a line of node ``rank`` (``stamp``: the engine's time of it, or None);
- ``("exit", rank, code, None)``: node ``rank``'s container exited with ``code``;
- ``("lost", rank, reason, endpoint)``: node ``rank``'s stream broke, or (``rank`` None) the heartbeat found
  ``endpoint`` not answering.

A lost stream is not a lost job: :func:`await_engine` pings the engine until it answers or
``DDPCTL_ENGINE_WAIT`` seconds (default 60) have passed, and the caller re-attaches from the last line it got
(:meth:`Streams.follow` with ``since``), so a daemon restart loses no line and repeats none.
"""

from __future__ import annotations

import datetime as _dt
import os
import queue
import threading
import time
from typing import Callable, Iterator, Mapping

from ddpctl.errors import UsageError
from ddpctl.joboutput.lines import split_lines
from ddpctl.local.engine_interface import Engine
from ddpctl.local.executor.common import Say, exc_reason, say_nothing

ENGINE_WAIT_ENV = "DDPCTL_ENGINE_WAIT"
ENGINE_WAIT_S = 60.0  # how long a lost Docker Engine (or host) gets to come back
HEARTBEAT_S = 5.0  # how often every engine of an attached job is pinged (a hung daemon breaks no stream)
PING_TIMEOUT_S = 5.0


def engine_wait_s(environ: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for a lost engine: ``DDPCTL_ENGINE_WAIT`` (a number >= 0), default 60."""
    text = (os.environ if environ is None else environ).get(ENGINE_WAIT_ENV, "").strip()
    if not text:
        return ENGINE_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise UsageError(f"{ENGINE_WAIT_ENV}={text[:40]!r} is not a number of seconds from 0 to 86400",
                         f"set e.g. {ENGINE_WAIT_ENV}=60, or unset it")
    return value


def stamp(text: str) -> float | None:
    """Epoch seconds of a Docker log timestamp (RFC 3339, nanoseconds), or None when ``text`` is not one."""
    if len(text) < 20 or text[4:5] != "-" or text[10:11] != "T":
        return None
    head, _, frac = text.rstrip("Z").partition(".")
    try:
        base = _dt.datetime.fromisoformat(head).replace(tzinfo=_dt.timezone.utc).timestamp()
        return base + (float("0." + frac) if frac.isdigit() else 0.0)
    except ValueError:
        return None


def stamped(chunks: Iterator[bytes]) -> Iterator[tuple[float | None, str]]:
    """(stamp, text) for each line of a log requested with timestamps (a line without one: (None, line))."""
    for line in split_lines(chunks):
        head, sep, rest = line.partition(" ")
        when = stamp(head) if sep else None
        yield (when, rest) if when is not None else (None, line)


class Streams:
    """The pump threads of one attached job (or followed log) and its heartbeat, all feeding ``self.q``."""

    def __init__(self, engine: Engine, *, wait_for_exit: bool = True) -> None:
        self.engine = engine
        self.q: queue.Queue = queue.Queue()
        self.wait_for_exit = wait_for_exit  # attach: each pump ends with the container's exit code
        self.last: dict[int, float] = {}  # rank -> stamp of the last line put on the queue
        self._stop = threading.Event()

    def follow(self, rank: int, cid: str, *, since: float | None = None, tail: int | None = None) -> None:
        threading.Thread(target=self._pump, args=(rank, cid, since, tail), daemon=True).start()

    def refollow(self, rank: int, cid: str, since: float | None = None) -> None:
        """Attach to node ``rank`` again after its stream broke: from its last line on, none repeated."""
        self.follow(rank, cid, since=self.last.get(rank, since))

    def _pump(self, rank: int, cid: str, since: float | None, tail: int | None) -> None:
        after = self.last.get(rank) if since is not None else None
        try:
            for when, text in stamped(self.engine.logs(cid, follow=True, since=since, tail=tail, timestamps=True)):
                if after is not None and when is not None and when <= after:
                    continue  # already shown before the stream broke
                if when is not None:
                    self.last[rank] = when
                self.q.put(("line", rank, text, when))
            if self.wait_for_exit:
                self.q.put(("exit", rank, self.engine.wait(cid), None))
            else:
                self.q.put(("exit", rank, None, None))
        except Exception as exc:  # noqa: BLE001 - any failure goes to the main flow, never a thread traceback
            self.q.put(("lost", rank, exc_reason(exc), self._endpoint(cid)))

    def _endpoint(self, cid: str) -> str:
        try:
            return self.engine.endpoint(cid)
        except Exception:  # noqa: BLE001
            return self.engine.name

    def heartbeat(self, every: float = HEARTBEAT_S) -> None:
        """Ping every engine each ``every`` seconds; one that does not answer is reported as lost."""
        def beat() -> None:
            while not self._stop.wait(every):
                for name in self.engine.endpoints():
                    try:
                        self.engine.check(name, PING_TIMEOUT_S)
                    except Exception as exc:  # noqa: BLE001
                        self.q.put(("lost", None, exc_reason(exc), name))
        threading.Thread(target=beat, daemon=True).start()

    def close(self) -> None:
        self._stop.set()


class EngineWatch:
    """One event stream per engine of a job, open for the whole run: it breaks when that daemon goes away, even
    when the daemon is back before anything else noticed (a restart stops the containers on connections it
    still serves, then exits). :meth:`breaks` hands the main flow each break (endpoint, when, why)."""

    def __init__(self, engine: Engine, label: str) -> None:
        self.engine, self.label = engine, label
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._breaks: list[tuple[str, float, str]] = []
        for name in engine.endpoints():
            threading.Thread(target=self._watch, args=(name,), daemon=True).start()

    def _watch(self, name: str) -> None:
        while not self._stop.is_set():
            try:
                for _ in self.engine.events(name, self.label):
                    if self._stop.is_set():
                        return
                reason = "its event stream ended"
            except NotImplementedError:
                return
            except Exception as exc:  # noqa: BLE001 - handed to the main flow
                reason = exc_reason(exc)
                if "timed out" in reason.lower():
                    continue  # a quiet stream hit the client's read timeout: the daemon is fine
            if self._stop.is_set():
                return
            with self._lock:
                self._breaks.append((name, time.monotonic(), reason))
            while not self._stop.wait(0.5):  # reopen once it answers
                try:
                    self.engine.check(name, PING_TIMEOUT_S, fresh=True)
                    break
                except Exception:  # noqa: BLE001
                    continue

    def breaks(self) -> list[tuple[str, float, str]]:
        with self._lock:
            out, self._breaks = self._breaks, []
        return out

    def close(self) -> None:
        self._stop.set()


def await_engine(engine: Engine, endpoint: str, reason: str, *, wait_s: float, say: Say = say_nothing,
                 describe: Callable[[str], str] | None = None, clock=time.monotonic, nap=time.sleep,
                 fresh: bool = False) -> float | None:
    """Wait up to ``wait_s`` for ``endpoint`` to answer again. Returns how long it was away (0.0 when it
    answers at once: only a stream broke), or None when it did not come back in time. ``fresh``: the first
    ping on a new connection."""
    t0 = clock()
    try:
        engine.check(endpoint, PING_TIMEOUT_S, fresh=fresh)
        return 0.0
    except Exception:  # noqa: BLE001
        pass
    what = describe(endpoint) if describe else f"Docker Engine {endpoint}"
    say(f"lost the connection to {what} ({reason[:160]}); waiting up to {wait_s:.0f} s for it to come back "
        f"({ENGINE_WAIT_ENV} sets how long)")
    while clock() - t0 < wait_s:
        nap(min(1.0, max(0.0, wait_s - (clock() - t0))))
        try:
            engine.check(endpoint, PING_TIMEOUT_S)
        except Exception:  # noqa: BLE001
            continue
        away = clock() - t0
        say(f"{what} answers again after {away:.1f} s")
        return away
    return None
