"""The requirements layer of a workspace image: where pip gets the wheels, and a build that leaves no trace of
what was staged for it.

Where the wheels come from: the user's ``--wheelhouse`` / ``--index-url`` win. With neither, pip inside the base
installs from the index it reaches; when it reaches none (a proxy whose TLS CA only the host trusts, a mirror
only the host's pip configuration names) while the host does, the wheelhouse is made on this host
(:func:`layer_sources`, :func:`ddpctl.images.host_wheels.download_missing`): resolved against what the base
already has (its torch, the ``nvidia-*`` libraries and the rest count as installed and are never fetched), for
the base's Python and platform, installed with ``--no-index``, and removed after the build. The layer's key does
not depend on any of this (:func:`ddpctl.images.workspace.deps_hash`).

The build: a Dockerfile cannot do it on this engine: the legacy builder (the only one the Docker SDK drives, and
the only one without the ``buildx`` plugin) has no secret mounts, records every build argument in the image
history, and a ``COPY``-ed file stays in its layer even when a later step deletes it. So the layer is made the
way the builder makes a ``RUN`` step, minus those: a container of the base image gets ``/tmp/ddpctl-ws`` (the
requirements file, the wheelhouse, the CA bundle, the index URL with its credentials in a file, and the
install script) copied in through the API, runs pip, deletes ``/tmp/ddpctl-ws`` before it exits, and is
committed as ``ddpctl/workspace-deps:<hash>`` with the base image's configuration. The one new layer holds the
installed packages only; the history says ``/bin/sh /tmp/ddpctl-ws/install.sh``; no environment variable,
argument or label carries the index URL (only its credential-free form, in a label).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpctl.errors import DdpctlError, EngineError, UsageError
from ddpctl.images import host_wheels, requirements_file
from ddpctl.images import workspace as ws
from ddpctl.launch import LABEL_MANAGED_BY, MANAGED_BY

STAGE = "/tmp/ddpctl-ws"
LABEL_INDEX = "ai.ddpctl.workspace.index"  # the index the layer was installed from, credentials removed

SCRIPT = f"""set -e
W={STAGE}
trap 'rm -rf "$W"' EXIT
set --
if [ -n "$(ls "$W/wheelhouse")" ]; then
    set -- --find-links "$W/wheelhouse"
    [ -f "$W/index-url" ] || set -- "$@" --no-index
fi
[ ! -f "$W/no-index" ] || set -- "$@" --no-index
[ ! -f "$W/index-url" ] || set -- "$@" --index-url "$(cat "$W/index-url")"
[ ! -f "$W/ca/ca.pem" ] || set -- "$@" --cert "$W/ca/ca.pem"
PY=$(command -v python3 || command -v python)
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 \\
    "$PY" -m pip install -q --progress-bar off "$@" -r "$W/requirements.txt"
mkdir -p {ws.WORKSPACE}
"""


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, *, path: Path | None = None,
         mode: int = 0o600) -> None:
    info = tarfile.TarInfo(f"{STAGE.lstrip('/')}/{name}")
    if data is None and path is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(info)
        return
    info.mode = mode
    if path is not None:
        info.size = path.stat().st_size
        with open(path, "rb") as fh:
            tar.addfile(info, fh)
    else:
        info.size = len(data or b"")
        tar.addfile(info, io.BytesIO(data or b""))


def stage_archive(requirements: Path, pip: ws.PipOptions, *, no_index: bool = False) -> bytes:
    """``/tmp/ddpctl-ws`` as a tar for ``put_archive``: script, requirements, wheelhouse, CA, index URL, and with
    ``no_index`` the marker that keeps pip off any index (a host-made wheelhouse, even an empty one)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("", "wheelhouse", "ca"):
            _add(tar, d)
        _add(tar, "install.sh", SCRIPT.encode())
        _add(tar, "requirements.txt", path=requirements)
        if pip.wheelhouse is not None:
            for whl in sorted(pip.wheelhouse.iterdir()):
                if whl.is_file() and whl.suffix in (".whl", ".gz", ".zip"):
                    _add(tar, f"wheelhouse/{whl.name}", path=whl)
        if pip.ca_file is not None:
            _add(tar, "ca/ca.pem", path=pip.ca_file)
        if pip.index_url:
            _add(tar, "index-url", pip.index_url.encode())
        if no_index:
            _add(tar, "no-index", b"")
    return buf.getvalue()


def _commit_config(base_config: dict, labels: dict[str, str]) -> dict:
    """The committed image's configuration: the base image's, WORKDIR /workspace, the labels added. Empty
    command fields are sent as [] so the engine does not fill them from the install container."""
    keep = ("User", "Env", "Cmd", "Entrypoint", "ExposedPorts", "Volumes", "StopSignal", "Healthcheck", "Shell",
            "OnBuild")
    conf = {k: base_config.get(k) for k in keep if base_config.get(k) is not None}
    conf["Entrypoint"] = base_config.get("Entrypoint") or []
    conf["Cmd"] = base_config.get("Cmd") or ([] if conf["Entrypoint"] else ["/bin/sh"])
    conf["WorkingDir"] = ws.WORKSPACE
    conf["Labels"] = {**(base_config.get("Labels") or {}), **labels}
    return conf


def build_deps(client, *, base: str, tag: str, requirements: Path, pip: ws.PipOptions, labels: dict[str, str],
               line, what: str, no_index: bool = False) -> str:
    """Install ``requirements`` on ``base`` as described above; the image is tagged ``tag``. Returns its id.
    ``line`` gets pip's output. A failure leaves no container and no image behind."""
    from ddpctl.dockerengine.tools import remove_quietly

    repo, _, version = tag.rpartition(":")
    labels = {**labels, LABEL_MANAGED_BY: MANAGED_BY, ws.LABEL_PURPOSE: ws.PURPOSE_DEPS,
              **({LABEL_INDEX: requirements_file.redact(pip.index_url)} if pip.index_url else {})}
    container, lines = None, []
    try:
        base_config = client.api.inspect_image(base)["Config"] or {}
        container = client.containers.create(base, ["/bin/sh", f"{STAGE}/install.sh"], entrypoint=[], user="0",
                                             working_dir="/", labels={LABEL_MANAGED_BY: MANAGED_BY,
                                                                      ws.LABEL_PURPOSE: ws.PURPOSE_DEPS})
        container.put_archive("/", stage_archive(requirements, pip, no_index=no_index))
        container.start()
        for chunk in container.logs(stdout=True, stderr=True, stream=True, follow=True):
            for text in chunk.decode("utf-8", "replace").splitlines():
                lines.append(text)
                line(text)
        code = int(container.wait().get("StatusCode", 1))
        if code != 0:
            requirements_file.raise_pip_failure(lines, what, code)
        image = container.commit(repository=repo, tag=version, conf=_commit_config(base_config, labels),
                                 message="ddpctl: pip install -r requirements.txt")
        return image.id
    except DdpctlError:
        raise
    except Exception as exc:  # noqa: BLE001 - connection dropped, API error
        first = (str(exc).splitlines() or [exc.__class__.__name__])[0][:300]
        raise EngineError(f"building the {what} failed: {first}", "read the build output above") from None
    finally:
        remove_quietly(container)


@dataclass
class LayerSources:
    """pip's sources for one requirements layer build: the user's, or a wheelhouse made on this host (``scratch``,
    removed by :meth:`close`) installed with ``no_index``."""

    pip: ws.PipOptions
    no_index: bool = False
    scratch: Path | None = None

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def layer_sources(client, base: str, requirements: Path, pip: ws.PipOptions, progress) -> LayerSources:
    """pip's sources for building the requirements layer of ``requirements`` on ``base`` (see the module doc)."""
    if pip.wheelhouse is not None or pip.index_url:
        return LayerSources(pip)
    facts = host_wheels.probe(client, base, index=True)
    if facts.index_ok:
        progress.line(f"pip in {base} reaches a package index: {requirements.name} is installed from it")
        return LayerSources(pip)
    built = requirements_file.source_references(requirements.read_text())
    if built:
        n, req = built[0]
        raise UsageError(f"{requirements} line {n}: {requirements_file.shown(req)} is not a wheel, and pip in {base} reaches no "
                         "package index: resolving it on this host would run its build code here",
                         "build its wheel into --wheelhouse DIR (pip wheel -w DIR ...), or pass --index-url")
    progress.line(f"pip in {base} reaches no package index: resolving {requirements.name} with pip on this host "
                  f"against the {len(facts.installed)} distributions {base} has ({facts.target.describe()})")
    scratch = Path(tempfile.mkdtemp(prefix="ddpctl-wheels-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    try:
        wh = host_wheels.download_missing(requirements, facts, scratch / "wheels")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    kept = [f"{name} {facts.has(name)}" for name in ("torch", "numpy") if facts.has(name)]
    progress.line(f"wheelhouse made on this host: {wh.summary()}: {', '.join(wh.wheels) or 'nothing missing'}"
                  + (f" (kept from {base}: {', '.join(kept)})" if kept else ""))
    return LayerSources(ws.PipOptions(wheelhouse=scratch / "wheels", ca_file=pip.ca_file), no_index=True,
                        scratch=scratch)
