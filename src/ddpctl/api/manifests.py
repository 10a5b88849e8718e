"""``ddpctl.render`` and ``ddpctl.validate``: the manifests of a job spec, and the check of manifests.

``render`` returns the text ``ddpctl render TARGET`` prints for the same spec, byte for byte (the CLI calls it);
``validate`` runs the checks of ``ddpctl validate`` and returns the report it prints.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ddpctl.errors import UsageError
from ddpctl.targets import render_targets

if TYPE_CHECKING:
    from ddpctl.spec import JobSpec
    from ddpctl.validate import Report

DOCUMENT_SEPARATOR = "---\n"


def _target(target: str) -> str:
    names = render_targets()
    if target not in names:
        raise UsageError(f"unknown render target {target!r}", f"use one of: {', '.join(names)}")
    return target


def render_files(target: str, spec: JobSpec) -> dict[str, str]:
    """``{file name: text}`` of ``target`` for ``spec`` (what ``ddpctl render TARGET -o DIR/`` writes)."""
    from ddpctl.render import render_files as files

    return files(_target(target), spec)


def join(files: Mapping[str, str]) -> str:
    """The files as one stream, as ``ddpctl render`` prints them."""
    return DOCUMENT_SEPARATOR.join(files.values())


def render(target: str, *, command: Sequence[str] | None = None, spec: JobSpec | Mapping[str, Any] | None = None,
           file: str | os.PathLike[str] | None = None, **spec_fields: Any) -> str:
    """The manifest(s) of a job for ``target``: ``"compose"``, ``"pytorchjob"``, ``"trainjob"`` or ``"slurm"``.

    The same text as ``ddpctl render TARGET`` with the same spec (several files, as multi-host compose gives,
    are joined by ``---`` lines). ``spec_fields`` are the job spec's keys; they override ``spec`` or ``file``.

    Example::

        >>> import ddpctl
        >>> text = ddpctl.render("pytorchjob", nodes=2, gpus_per_node=8, command=["python", "train.py"])
        >>> text.startswith("apiVersion: kubeflow.org/v1")
        True

    Raises :class:`ddpctl.BadInput` for an invalid spec or a feature the target does not support.
    """
    from ddpctl.api.spec_input import job_spec

    _target(target)
    return join(render_files(target, job_spec(spec_fields, command=command, spec=spec, file=file)))


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and ":" not in text.split("/")[0] and len(text) < 4096


def validate_paths(paths: Sequence[str], *, skip_unknown: bool = False) -> Report:
    """``ddpctl validate PATH...``: files, directories or '-' (stdin)."""
    from ddpctl.joboutput.visible import visible
    from ddpctl.validate import ManifestError
    from ddpctl.validate import validate_paths as check

    for path in paths:
        if not path:  # Path('') is the current directory: never walk what the caller did not name
            raise UsageError("an empty path was given", "name manifest files or directories, or '-' for stdin")
        if "\0" in path:
            raise UsageError(f"path '{visible(path)[:120]}' contains a NUL character", "name an existing file")
    try:
        return check(paths, skip_unknown=skip_unknown)
    except ManifestError as exc:
        raise UsageError(str(exc).splitlines()[0], "") from None


def validate(path_or_text: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
             skip_unknown: bool = False) -> Report:
    """Check manifests as ``ddpctl validate`` does; the report it prints.

    ``path_or_text``: a file or directory (a :class:`~pathlib.Path`, or a string naming one), several of them (a
    list), or the YAML text itself (a string with a line break or a ``key:``). The report lists the problems
    (``report.problems``, each printed as ``FILE:PATH: message``; ``report.errors`` are those that are no
    warning) and says ``report.summary()``.

    Example::

        >>> report = ddpctl.validate(ddpctl.render("trainjob", nodes=2))
        >>> report.errors
        []

    Raises :class:`ddpctl.BadInput` when a file cannot be read as a manifest (exit 2 in the CLI).
    """
    from ddpctl.validate import ManifestError, validate_text

    if isinstance(path_or_text, os.PathLike):
        return validate_paths([os.fspath(path_or_text)], skip_unknown=skip_unknown)
    if isinstance(path_or_text, str):
        if _looks_like_path(path_or_text) and path_or_text != "-":
            return validate_paths([path_or_text], skip_unknown=skip_unknown)
        try:
            return validate_text(path_or_text, "<text>", skip_unknown=skip_unknown)
        except ManifestError as exc:
            raise UsageError(str(exc).splitlines()[0], "") from None
    if isinstance(path_or_text, Sequence) and not isinstance(path_or_text, bytes):
        if not all(isinstance(p, (str, os.PathLike)) for p in path_or_text):
            raise UsageError("validate() takes a list of paths; an item of it is not a path",
                             "pass e.g. ['k8s/pytorchjob.yaml', 'compose']")
        paths = [os.fspath(p) for p in path_or_text]
        if not paths:
            raise UsageError("no file given", "name manifest files or directories")
        return validate_paths(paths, skip_unknown=skip_unknown)
    raise UsageError(f"validate() takes a path, a list of paths or YAML text, got {type(path_or_text).__name__}",
                     "pass e.g. 'k8s/pytorchjob.yaml'")


__all__ = ["join", "render", "render_files", "validate"]
