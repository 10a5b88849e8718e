"""The small image and container helpers every Docker user shares, over a client from
:func:`ddpctl.dockerengine.connect`: the local cluster (:class:`ddpctl.dockerengine.docker_engine.DockerEngine`) and the
image commands (:mod:`ddpctl.images`: builds, the base import, the check) use the same image lookup, nvidia-runtime
test and run-once container. ``docker`` is imported lazily, only when the engine is used.
"""

from __future__ import annotations

from ddpctl.errors import EngineError
from ddpctl.launch import LABEL_MANAGED_BY, MANAGED_BY


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
