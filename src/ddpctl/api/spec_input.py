"""One :class:`~ddpctl.spec.JobSpec` from what a Python caller gives: keyword arguments named as the job spec's
keys (``nodes=2``, ``env={"A": "1"}``, ``kubernetes={"queue": "q"}``), a spec (a :class:`JobSpec` or a mapping as
the YAML file holds it) or a file, and the command words.

The rules and messages are those of ``ddpctl up`` / ``ddpctl render``: the values are merged over the file as its
flags are (:mod:`ddpctl.spec.merge`: a section option and an ``env`` entry one by one) and checked once by the
spec's field table.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ddpctl.errors import SpecError, UsageError
from ddpctl.joboutput.visible import visible
from ddpctl.rules.base import MAX_YAML_DEPTH
from ddpctl.spec import JobSpec, load_spec, spec_from_dict, spec_to_dict


def _flatten(source: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Top-level keys as they are; a section given as a mapping becomes its dotted options; an ``env`` mapping
    becomes ``KEY=VALUE`` entries (merged per key over the file's, as ``--env`` is)."""
    from ddpctl.spec.fields import TOP_KEYS
    from ddpctl.spec.model import SECTIONS

    out: dict[str, Any] = {}
    for key, value in source.items():
        if not isinstance(key, str):
            raise SpecError(f"{what} key {key!r} is not a string", "name the spec's keys, e.g. nodes=2")
        if key not in TOP_KEYS:
            import difflib

            close = difflib.get_close_matches(key, sorted(TOP_KEYS), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(sorted(TOP_KEYS))}"
            raise SpecError(f"unknown job spec key '{visible(key)[:80]}' in {what}", hint)
        if value is None:
            continue
        if key in SECTIONS and isinstance(value, Mapping):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = v
        elif key in ("env", "secret_env") and isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(k, str) and "=" in k:  # 'A=B': 1 would read as A set to 'B=1'
                    raise SpecError(f"{key} name '{visible(k)[:80]}' contains '='",
                                    f"the key is the variable's name, the value its value: {key}={{'A': 'B=1'}}")
                if isinstance(v, float) and not math.isfinite(v):
                    raise SpecError(f"{key} '{visible(k)[:80]}' is {v}, not a value a variable can hold",
                                    "pass a finite number or a string")
            if all(isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
                   for k, v in value.items()):
                out[key] = [f"{k}={v}" for k, v in value.items()]
            else:
                out[key] = dict(value)  # the spec's check names the bad entry
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


MAX_INT = 1 << 63  # beyond any count, size or id a spec holds (and before int -> str's own limit)


def _bounded(value: Any, what: str, depth: int = 0) -> None:
    """The limits a job file's reader sets, for a caller's Python values: nesting and integer size (a
    SpecError naming ``what``, where Python would raise RecursionError or ValueError deep in the checks)."""
    if depth > MAX_YAML_DEPTH:  # the job file's own limit
        raise SpecError(f"{what}: nested more than {MAX_YAML_DEPTH} levels deep", "pass the job spec's keys and values")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_INT:
        raise SpecError(f"{what}: a number over 2**63", "pass a count or size a job can use")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _bounded(k, what, depth + 1)
            _bounded(v, what, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _bounded(v, what, depth + 1)


def job_spec(fields: Mapping[str, Any], *, command: Sequence[str] | None = None,
             spec: JobSpec | Mapping[str, Any] | None = None, file: str | os.PathLike[str] | None = None) -> JobSpec:
    """The spec of ``fields`` over ``spec`` (or over ``file``), with ``command`` when given.

    Raises :class:`~ddpctl.errors.BadInput` (a :class:`~ddpctl.errors.SpecError` or
    :class:`~ddpctl.errors.UsageError`) with the message ``ddpctl`` prints for the same input.
    """
    if spec is not None and file is not None:
        raise UsageError("both spec= and file= were given", "pass one of them (keyword arguments override either)")
    _bounded(fields, "the keyword arguments")
    if isinstance(spec, Mapping):
        _bounded(spec, "spec")
    if isinstance(spec, JobSpec) and command is None and not any(v is not None for v in fields.values()):
        # checked again: one built by hand (JobSpec(...)) has had no check; its host paths stay as its maker
        # chose them (spec_from_dict resolves nothing)
        return spec_from_dict(spec_to_dict(spec))
    overrides: dict[str, Any] = {}
    if isinstance(spec, JobSpec):
        overrides.update(_flatten(spec_to_dict(spec), "spec"))
    elif isinstance(spec, Mapping):
        overrides.update(_flatten(spec, "spec"))
    elif spec is not None:
        raise UsageError(f"spec= must be a JobSpec or a mapping of the job spec's keys, got {type(spec).__name__}",
                         "pass e.g. spec={'nodes': 2} or file='job.yaml'")
    given = _flatten(fields, "the keyword arguments")
    if "env" in given and isinstance(overrides.get("env"), list) and isinstance(given["env"], list):
        from ddpctl.spec.merge import merge_env

        given["env"] = merge_env(overrides.pop("env"), given["env"])
    overrides.update(given)
    if command is not None:
        if isinstance(command, (str, bytes)) or not all(isinstance(w, str) for w in command):
            raise UsageError("command= must be a list of strings (the words after '--')",
                             "pass e.g. command=['python', 'train.py']")
        overrides["command"] = list(command) or None
    if file is not None and not isinstance(file, (str, os.PathLike)):
        raise UsageError(f"file= must be a path, got {type(file).__name__}", "pass e.g. file='job.yaml'")
    if file is not None and "\0" in os.fspath(file):
        raise UsageError("file= contains a NUL character", "pass the path of a job file, e.g. file='job.yaml'")
    return load_spec(Path(file) if file is not None else None, overrides)
