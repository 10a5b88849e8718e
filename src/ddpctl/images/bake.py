"""Your code in the job's image: what ``ddpctl render TARGET --workdir DIR --push REPO`` and
``ddpctl up --workdir DIR --bake`` do before rendering or starting anything.

:func:`bake` builds the workspace image of the spec's directory on the job's image (:mod:`ddpctl.images.workspace_build`),
pushes it (render) and returns the spec with that image, pinned by digest, and no host directory to mount.
:func:`plan_text` is the ``--dry-run`` of it: what would be built and pushed, with no engine and no registry.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from ddpctl.errors import UsageError
from ddpctl.images import requirements_file
from ddpctl.images import workspace as ws
from ddpctl.spec import JobSpec, WorkspaceOptions

PLACEHOLDER_DIGEST = "sha256:" + "0" * 64  # only for the support check before the build, never rendered


def source_dir(spec: JobSpec) -> str:
    """The directory whose code goes into the image: ``workspace.dir``, else ``workdir``."""
    w = spec.workspace
    if w.dir and spec.workdir and Path(w.dir) != Path(spec.resolved_workdir or ""):
        raise UsageError(f"workspace.dir {w.dir!r} and workdir {spec.resolved_workdir!r} name different directories",
                         "keep one of them (the code is baked from it)")
    directory = w.dir or spec.resolved_workdir
    if not directory:
        raise UsageError("there is no code directory to build into the image",
                         "pass --workdir DIR (the directory with your train.py) or set workspace.dir in the file")
    return directory


def check_command(spec: JobSpec, source: ws.Workspace) -> None:
    """A relative ``*.py`` the command names must be in the workspace (it runs from /workspace in the image)."""
    names = {f.rel for f in source.files}
    for word in spec.command:
        if word.endswith(".py") and not word.startswith(("/", "-", "$")):
            rel = Path(word).as_posix().removeprefix("./")
            if rel not in names:
                raise UsageError(f"the command runs {word}, which is not in the workspace {source.root} (or is "
                                 "left out by its .dockerignore)", "fix the command after '--' or the --workdir")
            return


def with_image(spec: JobSpec, image: str) -> JobSpec:
    """``spec`` running ``image`` (the code inside it) instead of mounting the host directory. What the renderers
    get: the build inputs (``workspace.dir``, ``.requirements``) are gone, ``workspace.repository`` stays only
    with an image pinned by digest (``JobSpec.baked``: the code's directory /workspace is the working directory)."""
    pinned = "@sha256:" in image
    workspace = WorkspaceOptions(repository=spec.workspace.repository if pinned else None)
    return dataclasses.replace(spec, image=image, workdir=None, workdir_host=None, workspace=workspace)


def check_target(target: str, spec: JobSpec) -> None:
    """Refuse, before any build, a spec the target cannot render once the image is pinned."""
    from ddpctl.render import render_files

    source_dir(spec)
    repo, _ = ws.split_ref(spec.workspace.repository or "")
    render_files(target, with_image(spec, f"{repo}@{PLACEHOLDER_DIGEST}"))


def repository(spec: JobSpec, source: ws.Workspace) -> tuple[str, str | None]:
    if spec.workspace.repository:
        return ws.split_ref(spec.workspace.repository)
    return ws.default_repository(source.root), None


def scan(spec: JobSpec, *, allow_credentials: bool = False) -> ws.Workspace:
    """The spec's code directory as it goes into the image (``allow_credentials``: the command line's
    --allow-credential-files, never a file's)."""
    return ws.scan(source_dir(spec), spec.workspace.requirements, allow_credentials=allow_credentials)


def planned_ref(spec: JobSpec, source: ws.Workspace | None = None) -> str:
    """The reference a build would get, its content hash not known without the engine: REPO:ws-<content hash>."""
    repo, tag = repository(spec, source or scan(spec))
    return f"{repo}:{tag or 'ws-<content hash>'}"


def plan_text(spec: JobSpec, target: str, *, push: bool, pip: ws.PipOptions | None = None,
              allow_credentials: bool = False) -> str:
    """The ``--dry-run`` report: the files, requirements, base, and where the image would go."""
    source = scan(spec, allow_credentials=allow_credentials)
    check_command(spec, source)
    repo, _ = repository(spec, source)
    if push:
        check_registry(repo)  # the dry run refuses what the real run refuses
    ref = planned_ref(spec, source)
    shown = [f.rel for f in source.files]
    lines = [f"would build: {ref}",
             f"  from:         {source.root} ({len(shown)} files: {', '.join(shown[:8])}"
             f"{', ...' if len(shown) > 8 else ''})",
             *ws.excluded_lines(source, indent="  "),
             f"  requirements: {source.requirements or 'none'}",
             *([f"  pip:          {requirements_file.describe(pip, requirements_file.options(source.requirements))}"]
               if source.requirements else []),
             f"  on:           {spec.resolved_image}",
             f"  command:      {shlex.join(spec.command)} (in /workspace)"]
    if push:
        lines.append(f"would push:  {ref} to {ws.registry_of(repo) or 'docker.io'}")
        lines.append(f"would render: {target} with image {repo}@sha256:<digest of that push>")
    else:
        lines.append(f"would run:   {ref} on this Docker Engine (no host directory mounted)")
    return "\n".join(lines) + "\n"


def check_registry(repo: str) -> None:
    if ws.registry_of(repo) is None:
        raise UsageError(f"--push {repo!r} names no registry", "pass REGISTRY/NAME, e.g. registry.example:5000/team/proj")


def bake(spec: JobSpec, *, push: bool, pip: ws.PipOptions | None = None,
         allow_credentials: bool = False) -> JobSpec:
    """Build (and with ``push`` push) the workspace image; the spec to render or run with it."""
    from ddpctl.images.workspace_build import build_workspace

    source = scan(spec, allow_credentials=allow_credentials)
    check_command(spec, source)
    repo, tag = repository(spec, source)
    if push:
        check_registry(repo)
    built = build_workspace(source, base=spec.resolved_image, repository=repo, tag=tag, pip=pip)
    if not push:
        return with_image(spec, built.tag)
    from ddpctl.images.push import push_image

    return with_image(spec, push_image(built.tag))
