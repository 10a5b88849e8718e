"""The Docker Engine connection: the client factory and the small image/run helpers every Docker user shares.

Two kinds of code talk to the engine: the local cluster (:class:`ddpctl.local.docker_engine.DockerEngine`, the
adapter behind the executor's interface) and the image commands (:mod:`ddpctl.images`: builds, the base import, the check), which
need docker-py's streaming build/import/pull calls that are no part of the executor's interface. Both get their
client and these helpers from here, so there is one connection rule (ping, one-line error naming DOCKER_HOST),
one image lookup and one nvidia-runtime test. ``docker`` is imported lazily, only when the engine is used.
"""

from __future__ import annotations

import os

from ddpctl.errors import EngineError
from ddpctl.launch import LABEL_MANAGED_BY, MANAGED_BY


def docker_client():
    """A docker-py client that has answered a ping, or an EngineError naming DOCKER_HOST."""
    try:
        import docker  # noqa: F401
    except ImportError:  # pragma: no cover - a declared dependency
        raise EngineError("the Docker SDK for Python is not installed", "pip install docker") from None
    from ddpctl.dockerconnect import env_client_kwargs, explain, new_client, ssh_check

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    kw = env_client_kwargs()  # EngineError naming missing TLS files
    try:
        client = new_client(timeout=600, **kw)
        client.ping()
    except Exception as exc:  # DockerException, requests ConnectionError, FileNotFoundError ...
        if where.startswith("ssh://"):
            ssh_check(where)  # the connection's ssh is quiet: ask ssh once more, for its reason
        reason, fix = explain(exc, kw)
        raise EngineError(f"cannot reach the Docker Engine at {where} ({reason})",
                          fix or "start dockerd (scripts/ci-setup.sh does) or point DOCKER_HOST at a running one") from None
    return client


def image_labels(client, ref: str) -> dict[str, str] | None:
    """The labels of local image ``ref``, or None when it is not present."""
    import docker

    try:
        img = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    return dict(img.labels or {})


def image_id(client, ref: str) -> str | None:
    """The id of local image ``ref``, or None when it is not present."""
    import docker

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def has_nvidia_runtime(client) -> bool:
    """Does the engine have the ``nvidia`` runtime? (Errors talking to the engine propagate.)"""
    return "nvidia" in (client.info().get("Runtimes") or {})


def remove_quietly(container) -> None:
    """Remove ``container`` (forced) if there is one; best effort, for ``finally`` blocks where the error being
    raised matters more."""
    if container is None:
        return
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - best effort
        pass


def run_once(client, image: str, argv: list[str], device_requests=None, network_mode: str = "none") -> tuple[int, str]:
    """Run ``argv`` in ``image`` once (no network unless ``network_mode`` gives one) and remove the container
    whatever happens."""
    container = None
    try:
        container = client.containers.create(image, argv, labels={LABEL_MANAGED_BY: MANAGED_BY,
                                                                  "ddpctl.purpose": "image-check"},
                                             device_requests=device_requests, network_mode=network_mode)
        container.start()
        code = container.wait(timeout=300).get("StatusCode", 1)
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return int(code), logs
    except Exception as exc:
        raise EngineError(f"running {image} failed ({str(exc).splitlines()[0][:200]})",
                          "check the image with 'docker run --rm IMAGE python3 -V'") from None
    finally:
        remove_quietly(container)
