"""The spec's sources: a YAML file (with the line of every key, for error messages) and flags merged over it.

:func:`load_spec` is the only function of the spec package that does I/O: it reads the file, merges the flags
(:mod:`ddpctl.spec.merge`), validates once (:mod:`ddpctl.spec.build`) and resolves relative host paths.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from ddpctl import rules
from ddpctl.errors import SpecError, UsageError
from ddpctl.rules import RuleError
from ddpctl.spec import merge
from ddpctl.spec.build import spec_from_dict
from ddpctl.spec.checks import type_name
from ddpctl.spec.lines import Lines
from ddpctl.spec.model import JobSpec


def compose_yaml(text: str, source: str) -> tuple[Any, Lines]:
    """YAML text -> plain data plus key lines, within :mod:`ddpctl.rules`' limits (size, depth, aliases).

    Only the safe loader's scalar types are built; tags, merge keys and over-long numbers are one-line errors.
    """
    import yaml

    lines = Lines(source)
    root = rules.compose_yaml_bounded(text, source)
    if root is None:
        return {}, lines

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, yaml.MappingNode):
            if node.tag not in ("tag:yaml.org,2002:map",):
                raise SpecError(f"{source}:{node.start_mark.line + 1}: tag {node.tag!r} is not supported",
                                "remove the tag")
            out: dict[str, Any] = {}
            for knode, vnode in node.value:
                key = rules.construct_scalar(knode, source) if isinstance(knode, yaml.ScalarNode) else knode
                if not isinstance(key, str):
                    raise SpecError(
                        f"{source}:{knode.start_mark.line + 1}: a key is not a string",
                        "quote the key or remove it",
                    )
                sub = path + (key,)
                if key in out:
                    raise SpecError(
                        f"{source}:{knode.start_mark.line + 1}: key "
                        f"'{'.'.join(sub).encode('unicode_escape').decode('ascii')}' appears twice",
                        "keep one of them",
                    )
                lines.lines[sub] = knode.start_mark.line + 1
                out[key] = walk(vnode, sub)
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag not in ("tag:yaml.org,2002:seq",):
                raise SpecError(f"{source}:{node.start_mark.line + 1}: tag {node.tag!r} is not supported",
                                "remove the tag")
            return [walk(item, path) for item in node.value]
        return rules.construct_scalar(node, source)

    return walk(root, ()), lines


def load_spec(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> JobSpec:
    """Read ``path`` (YAML) if given, apply ``overrides`` (flags; None values mean 'not given').

    Overrides use the spec's keys; nested keys are dotted (``kubernetes.namespace``).

    Relative host paths (``volumes`` sources, ``workdir``) are resolved here, once, so every target mounts the
    same directory: values from the file against the file's directory, values from flags against the current
    directory (:attr:`Volume.host`, :attr:`JobSpec.workdir_host`).
    """
    data: dict[str, Any] = {}
    lines = Lines()
    file_dir: str | None = None
    if path is not None:
        p = Path(path)
        try:
            with open(p, "rb") as fh:
                raw = fh.read(rules.MAX_SPEC_BYTES + 1)
            if len(raw) > rules.MAX_SPEC_BYTES:
                raise UsageError(f"job file {str(p)!r} is larger than {rules.MAX_SPEC_BYTES} bytes",
                                 "a job spec is a few hundred bytes; check that this is the right file")
            text = raw.decode("utf-8")
        except FileNotFoundError:
            raise UsageError(f"job file {str(p)!r} does not exist", "check the path given to -f") from None
        except IsADirectoryError:
            raise UsageError(f"job file {str(p)!r} is a directory", "give the path of a YAML file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read job file {str(p)!r} ({exc.__class__.__name__})",
                             "check the file's permissions and encoding") from None
        loaded, lines = compose_yaml(text, str(p))
        if not isinstance(loaded, dict):
            raise SpecError(f"{p} must be a mapping of keys, got {type_name(loaded)}",
                            "start the file with keys such as 'name:' and 'nodes:'")
        data = loaded
        file_dir = os.path.dirname(os.path.abspath(p))
    from_flags = merge.apply_overrides(data, lines, overrides or {})
    spec = spec_from_dict(data, _lines=lines)
    spec = _resolve_workspace(spec, file_dir, from_flags)
    return _resolve_host_paths(spec, volumes_base=None if "volumes" in from_flags else file_dir,
                               workdir_base=None if "workdir" in from_flags else file_dir)


def _resolve_workspace(spec: JobSpec, file_dir: str | None, from_flags: set[str]) -> JobSpec:
    """``workspace.dir`` / ``workspace.requirements``: absolute, against the file's directory (or the current one
    for a flag), like ``workdir``; the code is read from there when the image is built."""
    w = spec.workspace
    dir_ = resolve_host_path(w.dir, file_dir) if w.dir else None
    req = resolve_host_path(w.requirements, None if "workspace.requirements" in from_flags else file_dir) \
        if w.requirements else None
    if (dir_, req) == (w.dir, w.requirements):
        return spec
    return dataclasses.replace(spec, workspace=dataclasses.replace(w, dir=dir_, requirements=req))


def resolve_host_path(path: str, base: str | None = None) -> str:
    """An absolute, normalised host path: ``~`` expanded, a relative path joined to ``base`` (default: cwd)."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(base or os.getcwd(), expanded)
    return os.path.normpath(expanded)


def _resolve_host_paths(spec: JobSpec, *, volumes_base: str | None, workdir_base: str | None) -> JobSpec:
    vols = tuple(dataclasses.replace(v, host=resolve_host_path(v.source, volumes_base))
                 if rules.is_relative_path(v.source) else v for v in spec.volumes)
    workdir_host = None
    if spec.workdir and rules.is_relative_path(spec.workdir):
        workdir_host = resolve_host_path(spec.workdir, workdir_base)
    for what, value in [("volume source", v.host) for v in vols if v.host] + [("workdir", workdir_host)]:
        if value is not None:  # the resolved path must still be one compose/apptainer can mount
            try:
                rules.host_path(value, what=what)
            except RuleError as exc:
                raise SpecError(f"{what} resolves to {value!r}: {exc.problem}", exc.fix) from None
    return dataclasses.replace(spec, volumes=vols, workdir_host=workdir_host)


