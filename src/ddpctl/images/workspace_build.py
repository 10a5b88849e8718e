"""``ddpctl image build --workdir DIR``: the workspace image built through the Docker SDK (legacy builder).

Two builds, each skipped when its result exists: the requirements layer (``ddpctl/workspace-deps:<hash>``,
made once per base + requirements file, by :mod:`ddpctl.images.workspace_requirements`: a committed container, so
no index credential reaches a layer) and the code layer on top of it (the directory's files at
``/workspace``, tagged by content). The code layer's build context is a tar stream made here, so only the files
:func:`ddpctl.images.workspace.scan` chose reach the engine, with fixed owner (root), modes (0644/0755) and
times: the content, not the checkout, decides the image.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import __version__, dockerengine
from ddpctl.dockerengine.tools import image_id as _image_id
from ddpctl.dockerengine.tools import image_labels
from ddpctl.errors import EngineError
from ddpctl.images import build_lock
from ddpctl.images import workspace as ws
from ddpctl.images.build_output import BuildProgress
from ddpctl.images.tidy import BuildTrace, drop_if_untagged, tidy_build
from ddpctl.launch import LABEL_MANAGED_BY, LABEL_VERSION, MANAGED_BY

_MTIME = 315532800  # 1980-01-01, as the wheel build uses: tar headers carry no checkout time


@dataclass
class WorkspaceImage:
    tag: str
    image_id: str
    cached: bool
    seconds: float
    base: str
    files: int
    labels: dict[str, str] = field(default_factory=dict)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, _MTIME
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _MTIME
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, name: str, path: Path, executable: bool = False) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = path.stat().st_size, 0o755 if executable else 0o644, _MTIME
    with open(path, "rb") as fh:
        tar.addfile(info, fh)


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, _MTIME
    tar.addfile(info)


def code_context(workspace: ws.Workspace, parent: str, labels: dict[str, str]):
    """The code layer's build context: the Dockerfile and ``code/`` (the workspace files)."""
    buf = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "Dockerfile", ws.code_dockerfile(parent, labels).encode())
        _add_dir(tar, "code")
        dirs: set[str] = set()
        for f in workspace.files:
            parts = f.rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    _add_dir(tar, f"code/{d}")
            if f.link is not None:
                _add_link(tar, f"code/{f.rel}", f.link)
            else:
                _add_file(tar, f"code/{f.rel}", f.path, f.executable)
    buf.seek(0)
    return buf


def run_build(client, context, *, tag: str, labels: dict[str, str], buildargs: dict[str, str] | None,
              progress: BuildProgress, what: str, trace: BuildTrace | None = None) -> str:
    """One legacy build from a tar stream; returns the image id. A failure leaves no step image behind;
    ``trace`` (given) records the build's step images for the caller's own tidying after a success."""
    trace = trace if trace is not None else BuildTrace()
    image_id, error = "", None
    try:
        for ev in client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                   pull=False, labels=labels, buildargs=buildargs or {}, decode=True):
            if "stream" in ev:
                for line in ev["stream"].splitlines():
                    trace.feed(line)
                    progress.line(line)
            if "error" in ev:
                error = str(ev.get("error", "")).strip()
            if isinstance(ev.get("aux"), dict) and "ID" in ev["aux"]:
                image_id = ev["aux"]["ID"]
    except Exception as exc:  # noqa: BLE001 - connection dropped, API error
        error = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    finally:
        context.close()
    if error:
        tidy_build(client, trace, None, None)
        raise EngineError(f"building the {what} failed: {error[:300]}", "read the build output above")
    return image_id or _image_id(client, tag) or ""


def build_workspace(workspace: ws.Workspace, *, base: str, repository: str, tag: str | None = None,
                    pip: ws.PipOptions | None = None, progress: BuildProgress | None = None,
                    force: bool = False) -> WorkspaceImage:
    """Build (or find) the workspace image of ``workspace`` on ``base``; returns its reference and id."""
    t0 = time.monotonic()
    pip = pip or ws.PipOptions()
    progress = progress or BuildProgress()
    client = dockerengine.connect()
    base_id = _image_id(client, base)
    if base_id is None:
        raise EngineError(f"base image {base} is not present on this Docker Engine",
                          "build it ('make image-cpu' for ddpctl/ddp-train:cpu) or pass --base with an image "
                          "this engine has")
    for line in ws.excluded_lines(workspace):
        progress.line(line)
    parent, deps_key = base, ""
    if workspace.requirements is not None:
        deps_key = ws.deps_hash(base_id, workspace.requirements, pip)
        parent = f"{ws.DEPS_REPO}:{deps_key}"
        if _image_id(client, parent) is not None and not force:
            progress.line(f"requirements layer {parent} is cached (same base and {workspace.requirements.name}): "
                          "not rebuilt")
        else:
            with build_lock.held(f"workspace-deps-{deps_key}", what=f"requirements layer {parent}",
                                 say=progress.line):
                _requirements_layer(client, workspace, base=base, parent=parent, deps_key=deps_key, pip=pip,
                                    progress=progress, force=force)
    parent_id = _image_id(client, parent) or ""
    content = _content_hash(parent_id, workspace)
    ref = ws.workspace_tag(repository, tag, content)
    with build_lock.held(f"workspace-{content[:32]}", what=f"workspace image {ref}", say=progress.line):
        return _code_layer(client, workspace, base=base, parent=parent, ref=ref, content=content,
                           deps_key=deps_key, progress=progress, force=force, t0=t0)


def _requirements_layer(client, workspace: ws.Workspace, *, base: str, parent: str, deps_key: str,
                        pip: ws.PipOptions, progress: BuildProgress, force: bool) -> None:
    """Build the requirements layer ``parent`` (this host's lock for it held): unless another process built it
    while this one waited for the lock."""
    assert workspace.requirements is not None
    if _image_id(client, parent) is not None and not force:
        progress.line(f"requirements layer {parent} was built by another ddpctl meanwhile (same base and "
                      f"{workspace.requirements.name}): not rebuilt")
        return
    from ddpctl.images import requirements_file, workspace_requirements

    progress.line(f"installing {workspace.requirements.name} on {base} (requirements layer {parent}): "
                  + requirements_file.describe(pip, requirements_file.options(workspace.requirements)))
    sources = workspace_requirements.layer_sources(client, base, workspace.requirements, pip, progress)
    try:
        workspace_requirements.build_deps(client, base=base, tag=parent, requirements=workspace.requirements,
                                          pip=sources.pip, no_index=sources.no_index,
                                          labels={ws.LABEL_WS_DEPS: deps_key}, line=progress.line,
                                          what=f"requirements layer from {workspace.requirements}")
    finally:
        sources.close()


def _code_layer(client, workspace: ws.Workspace, *, base: str, parent: str, ref: str, content: str, deps_key: str,
                progress: BuildProgress, force: bool, t0: float) -> WorkspaceImage:
    """The workspace image ``ref`` (this host's lock for it held): found up to date, or built on ``parent``."""
    existing = image_labels(client, ref)
    if existing is not None and existing.get(ws.LABEL_WS_HASH) == content and not force:
        progress.done(f"{ref} is up to date ({len(workspace.files)} files, content {content[:16]})")
        return WorkspaceImage(ref, _image_id(client, ref) or "", True, time.monotonic() - t0, base,
                              len(workspace.files), existing)
    previous = _image_id(client, ref)
    labels = {LABEL_MANAGED_BY: MANAGED_BY, LABEL_VERSION: __version__, ws.LABEL_PURPOSE: ws.PURPOSE_WORKSPACE,
              ws.LABEL_WS_HASH: content,
              ws.LABEL_WS_SOURCE: str(workspace.root), "org.opencontainers.image.base.name": base,
              **({ws.LABEL_WS_DEPS: deps_key} if deps_key else {}), **ws.git_labels(workspace.root)}
    image_id = run_build(client, code_context(workspace, parent, labels), tag=ref, labels={}, buildargs=None,
                          progress=progress, what=f"workspace image {ref}")
    if previous and previous != image_id:
        drop_if_untagged(client, previous)
    seconds = time.monotonic() - t0
    progress.done(f"built {ref} ({image_id[7:19]}) in {seconds:.1f}s: {len(workspace.files)} files of {workspace.root} "
                  f"on {base}")
    return WorkspaceImage(ref, image_id, False, seconds, base, len(workspace.files), labels)


def _content_hash(parent_id: str, workspace: ws.Workspace) -> str:
    import hashlib

    return hashlib.sha256(f"{parent_id}\0{workspace.digest()}".encode()).hexdigest()
