"""``ddpctl bench --resume DIR``: a matrix cut by ``--time-budget`` (or by a machine's limit on one call) goes on
where it stopped, into the same report.

Every ``ddpctl bench`` keeps ``DIR/bench-state.json`` up to date after each run: the matrix's options, the
system info, every probe and every run (its exit code, wall time, error and ddp-train's summary line). A resumed
call checks that its options are the report's (only ``--time-budget``, ``--cell-timeout`` and ``--python`` may
differ) and that the host has the same GPUs, keeps every probe and run that was measured (a failed run
included: it is a result), and runs only those the budget skipped or that never started. Each call records the
fingerprint of the code that ran it (:func:`source_fingerprint`); a resumed call whose code differs from the
earlier calls' says so (the report then mixes runs of both, and its first lines name each call's fingerprint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

from ddpctl.bench.programs import RunResult
from ddpctl.bench.runner import SKIPPED, BenchRun, CellRun
from ddpctl.errors import UsageError
from ddpctl.joboutput.visible import visible

STATE_FILE = "bench-state.json"
STATE_FORMAT = 1
# the options that make the matrix (BenchOptions field -> its flag); the others may change between calls
MATRIX_FLAGS = {"workloads": "--workloads", "strategies": "--strategies", "gpus": "--gpus", "pipelines": "--pipelines",
                "warmup": "--warmup", "steps": "--steps", "repeat": "--repeat", "batch_size": "--batch-size",
                "runtime": "--runtime", "probe": "--no-probe", "probe_max_bytes": "--probe-max",
                "extra_args": "--train-arg", "image": "--image", "links": "--links", "socket_nodes": "--socket-nodes"}


def package_fingerprint(name: str = "ddpctl") -> str:
    """12 hex digits of a SHA-256 over the Python and JSON files of the importable package ``name`` (relative
    paths and contents, sorted), or ``unknown`` where they cannot be read; located without importing it."""
    digest = hashlib.sha256()
    try:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return "unknown"
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    except (OSError, ImportError, ValueError):
        return "unknown"
    return digest.hexdigest()[:12]


def source_fingerprint(trainer: object = None) -> str:
    """A bench call's code: 12 hex digits of a SHA-256 over this ddpctl's package fingerprint and the trainer's,
    ``trainer``: what ``python -m ddp_train.sysinfo`` said of the ddp_train that runs the benchmark (on the host,
    under ``--python``, or in the ``--image``), ``unknown`` when it said nothing this ddpctl reads."""
    theirs = trainer if isinstance(trainer, str) and re.fullmatch(r"[0-9a-f]{12}", trainer) else "unknown"
    return hashlib.sha256(f"ddpctl {package_fingerprint()} ddp_train {theirs}".encode()).hexdigest()[:12]


def source_change(state: dict, source: str) -> str | None:
    """A note when this call's code differs from an earlier call's (None: the same, or not recorded there)."""
    other = [c["source"] for c in state.get("calls") or [] if c.get("source") and c["source"] != source]
    if not other:
        return None
    return (f"the code differs from an earlier call's (source {other[-1]} there, {source} here): the report "
            "will mix runs of both; start afresh in another directory for one version's figures")


def matrix_options(options) -> dict:
    """The options of a :class:`~ddpctl.bench.plan.BenchOptions` that define the matrix, as JSON values."""
    out = {}
    for name in MATRIX_FLAGS:
        value = getattr(options, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


MAX_STATE_BYTES = 64 << 20


def state_schema() -> dict:
    """The JSON Schema of bench-state.json (package data, ``ddpctl/bench/bench-state.schema.json``)."""
    from importlib.resources import files

    return json.loads(files("ddpctl.bench").joinpath("bench-state.schema.json").read_text(encoding="utf-8"))


def load(outdir: Path, *, rebuild: bool = False) -> dict:
    """The state of an earlier call in ``outdir``: a regular file of at most :data:`MAX_STATE_BYTES`, JSON (NaN
    and infinity read as null), valid against bench-state.schema.json (UsageError otherwise, or when there is none: nothing to resume,
    or to rebuild the report from with ``rebuild``)."""
    from ddpctl.validate.schema import Validator

    path = outdir / STATE_FILE
    what = f"bench rebuild {outdir}" if rebuild else f"--resume {outdir}"
    fix = ("pass a directory ddpctl bench wrote (-o)" if rebuild
           else "drop --resume to start the matrix afresh in another directory")

    if path.exists() and not path.is_file():
        raise UsageError(f"{what}: {STATE_FILE} is not a regular file", fix)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_STATE_BYTES + 1)
        if len(raw) > MAX_STATE_BYTES:
            raise UsageError(f"{what}: {STATE_FILE} is larger than {MAX_STATE_BYTES >> 20} MiB", fix)
        # NaN and infinity (a diverged loss in a summary an earlier ddpctl kept) read as null
        state = json.loads(raw.decode("utf-8"), parse_constant=lambda _: None)
    except FileNotFoundError:
        raise UsageError(f"{what}: no {STATE_FILE} there (no ddpctl bench wrote this report)",
                         "pass the -o directory of an earlier ddpctl bench" + ("" if rebuild else
                                                                              ", or drop --resume to start afresh")) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"{what}: cannot read {STATE_FILE} ({exc.__class__.__name__})", fix) from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise UsageError(f"{what}: {STATE_FILE} is not a state this ddpctl writes", fix)
    try:
        issues = Validator(state_schema(), strict=False).issues(state)
    except RecursionError:
        issues = None
    if issues is None or issues:
        where = visible("/".join(str(p) for p in issues[0].path))[:80] if issues else "(nesting)"
        said = visible(issues[0].message)[:120] if issues else "nested too deeply"
        raise UsageError(f"{what}: {STATE_FILE} is not a state this ddpctl writes ({where or '(top)'} {said})", fix)
    return state


def check_options(state: dict, options, outdir: Path) -> None:
    """The same matrix as the earlier call, or a one-line UsageError naming the first option that differs."""
    mine = matrix_options(options)
    theirs = state.get("matrix") or {}
    for name, flag in MATRIX_FLAGS.items():
        if mine.get(name) != theirs.get(name):
            raise UsageError(f"--resume {outdir}: {flag} differs from the earlier call's ({_show(theirs.get(name))} "
                             f"there, {_show(mine.get(name))} here)",
                             f"repeat the earlier command line (`{state.get('command', 'ddpctl bench')}`) with --resume; "
                             "only --time-budget, --cell-timeout and --python may change")


def _show(value) -> str:
    if value is None:
        return "the default"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return str(value)


def check_host(state: dict, sysinfo: dict, outdir: Path) -> None:
    """The same GPU model and count as the earlier call: a report measures one machine."""
    def what(info: dict) -> str:
        gpus = info.get("gpus") or []
        return f"{info.get('gpu_count', 0)} x {gpus[0]['name'] if gpus else 'CPU'}"

    before = state.get("sysinfo") or {}
    if what(before) != what(sysinfo):
        raise UsageError(f"--resume {outdir}: the report was measured on {what(before)}, this host has {what(sysinfo)}",
                         "resume on the same kind of machine, or start a new report in another directory")


def kept(state: dict, plan) -> tuple[dict, dict]:
    """The runs ((cell key, repeat) -> CellRun) and probes ((world size, link) -> (data, error)) of ``state`` to
    keep: every one that ran (the budget's skips are run again)."""
    cells = {c.key: c for c in plan.cells}
    runs = {}
    for r in state["runs"]:
        cell = cells.get(r.get("key"))
        if cell is None or _skipped(r.get("error")):
            continue
        result = RunResult(int(r.get("returncode", -1)), "", "", float(r.get("seconds", 0.0)))
        runs[(cell.key, int(r["repeat"]))] = CellRun(cell, int(r["repeat"]), result, r.get("summary"), r.get("error"))
    probes = {}
    for p in state.get("probes") or []:
        if p.get("data") is not None or not _skipped(p.get("error")):
            probes[(int(p["world_size"]), p["link"])] = (p.get("data"), p.get("error"))
    return runs, probes


NOT_STARTED = "skipped: not run yet (ddpctl bench --resume runs it)"


def options_of(state: dict):
    """The :class:`~ddpctl.bench.plan.BenchOptions` of the matrix ``state`` was measured with (TypeError,
    ValueError or KeyError when its matrix is not one this ddpctl knows)."""
    from ddpctl.bench.plan import BenchOptions

    matrix = state.get("matrix")
    if not isinstance(matrix, dict) or set(matrix) - set(MATRIX_FLAGS):
        raise KeyError("matrix")
    options = BenchOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in matrix.items()})
    from ddpctl.bench.plan import validate

    try:
        validate(options)
    except UsageError as exc:
        raise ValueError(visible(exc.problem)[:160]) from None
    return options


def measured(state: dict, plan) -> BenchRun:
    """What ``state`` measured as a :class:`BenchRun` of ``plan``, nothing run: its probes and runs (a skipped
    run as skipped), and every run of the plan it has no record of as not started."""
    bench = BenchRun(sysinfo=state.get("sysinfo") or {}, plan=plan)
    runs, probes = kept(state, plan)
    for (n, link), (data, error) in probes.items():
        if link == "local":
            target, errors, key = bench.probes, bench.probe_errors, n
        else:
            target, errors, key = bench.socket_probes, bench.socket_probe_errors, (n, link)
        if data is not None:
            target[key] = data
        if error is not None:
            errors[key] = error
    said = {(r.get("key"), r.get("repeat")): r.get("error") for r in state["runs"] if _skipped(r.get("error"))}
    for cell in plan.cells:
        for rep in range(plan.repeat):
            run = runs.get((cell.key, rep))
            if run is None:
                error = said.get((cell.key, rep)) or NOT_STARTED
                run = CellRun(cell, rep, RunResult(-1, "", "", 0.0), None, str(error))
            bench.runs.append(run)
    return bench


def _skipped(error) -> bool:
    return isinstance(error, str) and error.startswith(SKIPPED)


def dump(bench: BenchRun, *, matrix: dict, command: str, created: str, calls: list[dict]) -> str:
    """``bench-state.json``'s text for what ``bench`` holds now."""
    probes = [{"world_size": n, "link": "local", "data": bench.probes.get(n), "error": bench.probe_errors.get(n)}
              for n in sorted(set(bench.probes) | set(bench.probe_errors))]
    probes += [{"world_size": n, "link": link, "data": bench.socket_probes.get((n, link)),
                "error": bench.socket_probe_errors.get((n, link))}
               for n, link in sorted(set(bench.socket_probes) | set(bench.socket_probe_errors))]
    runs = [{"key": r.cell.key, "repeat": r.repeat, "returncode": r.result.returncode,
             "seconds": round(r.result.seconds, 3), "summary": r.summary, "error": r.error} for r in bench.runs]
    return json.dumps({"format": STATE_FORMAT, "matrix": matrix, "command": command[:8192], "created": created,
                       "calls": calls, "sysinfo": bench.sysinfo, "probes": probes, "runs": runs}, indent=1) + "\n"


def save(outdir: Path, text: str) -> None:
    from ddpctl.outfiles import write_files

    write_files({outdir / STATE_FILE: text})
