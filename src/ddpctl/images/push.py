"""``ddpctl image push REF`` (and ``image build --push``): push through the Docker SDK with streamed progress and
return the pushed reference by digest (``REPO@sha256:...``).

Registry credentials are the user's Docker config (``~/.docker/config.json`` or ``$DOCKER_CONFIG``, credential
helpers included), which docker-py reads for each push. Whether a registry may be spoken to over plain HTTP is
the Docker Engine's decision (its ``insecure-registries``; 127.0.0.0/8 is in it by default): ddpctl never
downgrades, and says how to mark a registry insecure when the engine refuses one.
"""

from __future__ import annotations

import re
import shlex

from ddpctl.errors import EngineError, UsageError
from ddpctl.images import workspace as ws
from ddpctl.images.build_output import BuildProgress
from ddpctl.images.pull import REGISTRY_UNREACHABLE

_DIGEST = re.compile(r"\bdigest: (sha256:[0-9a-f]{64})\b")
_DENIED = ("denied", "unauthorized", "authentication required", "forbidden", "no basic auth credentials")


def push_failure(ref: str, error: str) -> EngineError:
    """The daemon's push error as one line naming the problem and the fix."""
    repo, _ = ws.split_ref(ref)
    host = ws.registry_of(repo) or "docker.io"
    text = error.lower()
    short = " ".join(error.split())[:160]
    if "http response to https client" in text:
        return EngineError(f"registry {host} speaks plain HTTP and the Docker Engine only uses HTTPS for it",
                           f"if you trust that network, add \"{host}\" to \"insecure-registries\" in "
                           "/etc/docker/daemon.json and restart dockerd (loopback 127.0.0.0/8 is insecure by "
                           "default), or give the registry a TLS certificate")
    if any(k in text for k in _DENIED):
        return EngineError(f"registry {host} refused the push of {ref} ({short})",
                           f"log in with '{shlex.join(['docker', 'login', host])}' (ddpctl uses the Docker config's credentials) or "
                           "push to a repository you may write to")
    if any(k in text for k in REGISTRY_UNREACHABLE):
        return EngineError(f"cannot reach registry {host} to push {ref} ({short})",
                           "start the registry or fix the host:port in the image reference")
    return EngineError(f"pushing {ref} failed: {short}", "read the push output above")


def push_image(ref: str, *, progress: BuildProgress | None = None, client=None) -> str:
    """Push local image ``ref`` (REPO:TAG); returns ``REPO@sha256:<digest>`` as the registry stored it."""
    progress = progress or BuildProgress()
    repo, tag = ws.split_ref(ref)
    if tag is None:
        raise UsageError(f"{ref!r} has no tag", "push REPOSITORY:TAG (the tag 'ddpctl image build' printed)")
    if client is None:
        from ddpctl import dockerengine

        client = dockerengine.connect()
    from ddpctl.dockerengine.tools import image_id

    if image_id(client, ref) is None:
        raise UsageError(f"image {ref} is not on this Docker Engine",
                         "build it first ('ddpctl image build --workdir DIR --tag REPO') or check the name")
    progress.line(f"pushing {ref}")
    digest, error = None, None
    shown: dict[str, str] = {}
    try:
        for ev in client.api.push(repo, tag=tag, stream=True, decode=True):
            if "error" in ev:
                error = str(ev.get("error") or ev.get("errorDetail") or "push failed")
                continue
            aux = ev.get("aux")
            if isinstance(aux, dict) and str(aux.get("Digest", "")).startswith("sha256:"):
                digest = aux["Digest"]
            status = str(ev.get("status") or "")
            m = _DIGEST.search(status)
            if m:
                digest = digest or m.group(1)
            layer = ev.get("id")
            if layer and status and shown.get(layer) != status:  # one line per layer and state, no byte ticks
                shown[layer] = status
                progress.line(f"{layer}: {status}")
            elif status and not layer:
                progress.line(status)
    except Exception as exc:  # noqa: BLE001 - APIError, connection errors from docker-py
        error = getattr(exc, "explanation", None) or str(exc) or exc.__class__.__name__
    if error or digest is None:
        raise push_failure(ref, str(error or "the engine reported no digest"))
    pinned = f"{repo}@{digest}"
    progress.done(f"pushed {pinned}")
    return pinned
