"""Progress records (``ddp_train/progress.schema.json``, version 1) and summaries read back from output lines,
and what they say per rank: the newest step, the rate, the ETA. Pure: no I/O."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ddpctl.joboutput.lines import RANK_LINE
from ddpctl.joboutput.record_check import Rejected, check

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z? ")
SUPPORTED = 1  # the newest record version this reader knows; a newer one is read for the keys it knows


def strip_rank(text: str) -> str:
    m = RANK_LINE.match(text)
    return text[m.end():] if m else text


def read_record(text: str) -> tuple[str, dict] | Rejected | None:
    """(event, record) when ``text`` (one output line; a ``rank-N | `` prefix is skipped) is a valid progress
    record or summary (:mod:`ddpctl.joboutput.record_check`); a :class:`Rejected` reason when it looks like one
    and fails the check; None for any other line."""
    return check(strip_rank(text).strip())


def parse_event(text: str, event: str) -> dict | None:
    """The checked record of ``event`` ("progress", "summary") on one output line, else None (a line that
    fails the check is no record)."""
    found = read_record(text)
    return found[1] if isinstance(found, tuple) and found[0] == event else None


def is_record(text: str) -> bool:
    return parse_event(text, "progress") is not None


def stamp_seconds(stamp: str) -> float | None:
    """A Docker log timestamp (RFC 3339, UTC, nanoseconds) as Unix seconds."""
    import datetime as dt

    m = STAMP.match(stamp + " ")
    if not m:
        return None
    whole, _, frac = m.group(1).partition(".")
    try:
        t = dt.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        return None
    return t + (float("0." + frac[:6]) if frac else 0.0)


ETA_WINDOW = 10  # records a rank's rate (and so its ETA) is averaged over

def _num(v) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


@dataclass
class RankProgress:
    """One rank's records, oldest first (across restarts)."""

    rank: int
    records: list[dict] = field(default_factory=list)

    @property
    def last(self) -> dict:
        return self.records[-1]

    def step_time(self) -> float | None:
        """Seconds per step now, smoothed: wall time over steps across this run's last records (up to
        :data:`ETA_WINDOW`, one restart's only: pauses for evaluation and checkpoints count, one slow or fast
        interval does not swing the ETA); with a single record, that record's own figure."""
        b = self.last
        window = []
        for r in reversed(self.records[-ETA_WINDOW:]):
            if r.get("restart") != b.get("restart") or not _num(r.get("time")) or r["step"] > b["step"]:
                break
            window.append(r)
        a = window[-1] if window else b
        if b["step"] > a["step"] and b["time"] > a["time"]:
            return (b["time"] - a["time"]) / (b["step"] - a["step"])
        return _num(b.get("step_time_s")) or None

    def eta_s(self, now: float | None = None) -> float | None:
        total, st = self.last.get("total"), self.step_time()
        if not isinstance(total, int) or st is None:
            return None
        left = max(0, total - self.last["step"]) * st
        if now is not None and _num(self.last.get("time")):
            left = max(0.0, left - max(0.0, now - self.last["time"]))
        return left

    def to_dict(self, now: float | None = None) -> dict:
        r = self.last
        total = r.get("total") if isinstance(r.get("total"), int) else None
        eta = self.eta_s(now)
        return {"rank": self.rank, "node": r.get("node"), "host": r.get("host"), "restart": r.get("restart", 0),
                "step": r["step"], "total": total,
                "percent": _percent(r["step"], total),
                "epoch": r.get("epoch"), "samples_per_sec": _num(r.get("samples_per_sec")),
                "step_time_s": self.step_time(), "loss": _num(r.get("loss")), "lr": _num(r.get("lr")),
                "gpu_util": _num(r.get("gpu_util")), "gpu_mem_gb": _num(r.get("gpu_mem_gb")),
                "eta_s": None if eta is None else round(eta, 1),
                "checkpoint": r.get("checkpoint") if isinstance(r.get("checkpoint"), dict) else None,
                "time": r.get("time"), "records": len(self.records)}


@dataclass
class Collected:
    """The records of some output lines: each rank's progress, the newest summary, and how many lines looked
    like a record but failed the check (kept as plain lines; ``reason``: the first one's)."""

    ranks: dict[int, RankProgress] = field(default_factory=dict)
    summary: dict | None = None
    rejected: int = 0
    reason: str = ""

    def note(self) -> str | None:
        if not self.rejected:
            return None
        return (f"{self.rejected} line(s) looked like progress records or summaries but failed their schema "
                f"(first: {self.reason}); shown as plain output by 'ddpctl logs', not used here")


def collect_all(lines) -> Collected:
    """The :class:`Collected` records of output lines (text, prefixes allowed), in output order."""
    out = Collected()
    for text in lines:
        found = read_record(text)
        if found is None:
            continue
        if isinstance(found, Rejected):
            out.rejected += 1
            out.reason = out.reason or found
        elif found[0] == "progress":
            rec = found[1]
            out.ranks.setdefault(rec["rank"], RankProgress(rec["rank"])).records.append(rec)
        else:
            out.summary = found[1]
    for rp in out.ranks.values():  # several sources (attempts, nodes) may interleave: time order within a rank
        rp.records.sort(key=lambda r: (r.get("restart", 0), r.get("time") or 0.0))
    return out


def collect(lines) -> tuple[dict[int, RankProgress], dict | None]:
    """(rank -> progress, the newest summary) from output lines (text, prefixes allowed), in output order."""
    found = collect_all(lines)
    return found.ranks, found.summary


def job_progress(ranks: dict[int, RankProgress], now: float | None = None) -> dict | None:
    """The job's line: its slowest rank's step and ETA, the ranks' median rate, the newest checkpoint."""
    if not ranks:
        return None
    rows = [rp.to_dict(now) for rp in ranks.values()]
    step = min(r["step"] for r in rows)
    totals = [r["total"] for r in rows if r["total"]]
    total = max(totals) if totals else None
    rates = sorted(r["samples_per_sec"] for r in rows if r["samples_per_sec"] is not None)
    etas = [r["eta_s"] for r in rows if r["eta_s"] is not None]
    ckpts = [r["checkpoint"] for r in rows if r["checkpoint"]]
    ckpt = max(ckpts, key=lambda c: (c.get("step", -1), c.get("path") is not None)) if ckpts else None
    return {"step": step, "total": total, "percent": _percent(step, total),
            "samples_per_sec": rates[len(rates) // 2] if rates else None, "eta_s": max(etas) if etas else None,
            "loss": _mean([r["loss"] for r in rows]), "checkpoint": ckpt,
            "restart": max(r["restart"] or 0 for r in rows), "slowest_rank": slowest(rows)}


def _percent(step, total) -> float | None:
    """step/total in percent; None without a total or for a step below 0 (never "-50.0%")."""
    return round(100.0 * step / total, 1) if total and total > 0 and step >= 0 else None


def _mean(values):
    vals = [v for v in values if v is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def slowest(rows: list[dict]) -> int | None:
    """The rank that holds the job back: the fewest steps done, then the longest step time."""
    if len(rows) < 2 or all(r["total"] and r["step"] >= r["total"] for r in rows):
        return None  # one rank, or every rank is done
    key = [(r["step"], -(r["step_time_s"] or 0.0), -r["rank"]) for r in rows]
    low = min(key)
    if all(k[0] == low[0] for k in key) and len({round(r["step_time_s"] or 0.0, 6) for r in rows}) == 1:
        return None  # no rank is behind
    return -low[2]


def format_eta(seconds: float | None) -> str:
    if seconds is None or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        return "-"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def json_safe(value):
    """``value`` with every NaN or infinite float made None and every key a string, so ``json.dumps(...,
    allow_nan=False)`` holds (status --json, the kept metadata)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
