"""Pulling a base image the engine does not have, with a registry failure said in ddpctl's words."""

from __future__ import annotations

from ddpctl.dockerengine.tools import image_id
from ddpctl.errors import EngineError
from ddpctl.images.build_output import BuildProgress

# What an unreachable registry looks like in the daemon's pull and push errors (push.py reads it too).
REGISTRY_UNREACHABLE = ("no such host", "lookup ", "dial tcp", "i/o timeout", "connection refused", "network is unreachable",
                "tls handshake timeout", "client.timeout", "temporary failure in name resolution", "server misbehaving",
                "connection reset", "no route to host", "eof")
# ... and a registry that has no such image or refuses it (a pull's), with ddpctl's own words for it.
_NOT_THERE = ("not found", "manifest unknown", "pull access denied", "unauthorized", "denied", "does not exist")
PULL_FIX = ("pull it on a machine that reaches the registry and move it here ('docker save IMAGE | docker load'), "
            "pass --base with an image this engine already has, or build the CPU image offline with "
            "'make image-cpu'")


def pull_failure_reason(daemon_error: str) -> str:
    """The daemon's raw pull error (DNS, TLS, HTTP) as a short reason in ddpctl's words."""
    text = daemon_error.lower()
    if any(k in text for k in REGISTRY_UNREACHABLE):
        return "no registry is reachable from the Docker Engine"
    if any(k in text for k in _NOT_THERE):
        return "the registry has no such image or refuses access to it"
    first = " ".join(daemon_error.split())
    return f"the registry answered: {first[:120]}"


LOCAL_FIX = ("build the same torch/CUDA image with no registry on the local Debian base: 'make image CUDA_BASE=local' "
             "(ddpctl image base && ddpctl image build --base local); or ")


def pull_base(client, ref: str, progress: BuildProgress) -> str:
    """Pull a base image the engine does not have; returns its id. A failed pull is one line with the fix."""
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    progress.line(f"pulling base image {ref} (not present on this Docker Engine)")
    error = None
    try:
        for ev in client.api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in ev:
                error = str(ev.get("error") or ev.get("errorDetail") or "pull failed")
            elif ev.get("status") and not ev.get("progressDetail"):
                progress.line(f"{ev.get('id', '')} {ev['status']}".strip())
    except Exception as exc:  # APIError / NotFound / connection errors from docker-py
        error = getattr(exc, "explanation", None) or str(exc)
    found = None if error else image_id(client, ref)
    if found is None:
        from ddpctl.images.plans import DEFAULT_CUDA_BASE

        raise EngineError(f"cannot pull base image {ref}: {pull_failure_reason(str(error or 'not found'))}",
                          (LOCAL_FIX if ref == DEFAULT_CUDA_BASE else "") + PULL_FIX)
    return found
