"""One :class:`~ddpctl.spec.JobSpec` from what a Python caller gives: keyword arguments named as the job spec's
keys (``nodes=2``, ``env={"A": "1"}``, ``kubernetes={"queue": "q"}``), a spec (a :class:`JobSpec` or a mapping as
the YAML file holds it) or a file, and the command words.

The rules and messages are those of ``ddpctl up`` / ``ddpctl render``: the values are merged over the file as its
flags are (:mod:`ddpctl.spec.merge`: a section option and an ``env`` entry one by one) and checked once by the
spec's field table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ddpctl.errors import SpecError, UsageError
from ddpctl.spec import JobSpec, load_spec, spec_to_dict


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
            raise SpecError(f"unknown job spec key '{key}' in {what}", hint)
        if value is None:
            continue
        if key in SECTIONS and isinstance(value, Mapping):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = v
        elif key in ("env", "secret_env") and isinstance(value, Mapping):
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


def job_spec(fields: Mapping[str, Any], *, command: Sequence[str] | None = None,
             spec: JobSpec | Mapping[str, Any] | None = None, file: str | os.PathLike[str] | None = None) -> JobSpec:
    """The spec of ``fields`` over ``spec`` (or over ``file``), with ``command`` when given.

    Raises :class:`~ddpctl.errors.BadInput` (a :class:`~ddpctl.errors.SpecError` or
    :class:`~ddpctl.errors.UsageError`) with the message ``ddpctl`` prints for the same input.
    """
    if spec is not None and file is not None:
        raise UsageError("both spec= and file= were given", "pass one of them (keyword arguments override either)")
    if isinstance(spec, JobSpec) and command is None and not any(v is not None for v in fields.values()):
        return spec  # checked already, its host paths resolved as its maker chose
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
    return load_spec(Path(file) if file is not None else None, overrides)
