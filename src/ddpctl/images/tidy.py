"""Leave no ``<none>`` image behind after a build: the legacy builder's output read step by step
(:class:`BuildTrace`), the first stage kept as the ``<tag>-deps`` layer cache, the rest removed."""

from __future__ import annotations

import re

from ddpctl.dockerengine.tools import image_id as _image_id


class BuildTrace:
    """Reads the legacy builder's output: the image id after each step and where each stage ended."""

    _STEP_ID = re.compile(r"^\s*---> ([0-9a-f]{12,64})\s*$")
    _FROM = re.compile(r"^Step \d+/\d+ : FROM ", re.IGNORECASE)

    def __init__(self) -> None:
        self.ids: list[str] = []  # every step's image id, in order
        self.stage_ends: list[str] = []  # the last image of each finished stage but the final one
        self._froms = 0

    def feed(self, line: str) -> None:
        m = self._STEP_ID.match(line)
        if m:
            self.ids.append(m.group(1))
        elif self._FROM.match(line):
            if self._froms and self.ids:
                self.stage_ends.append(self.ids[-1])
            self._froms += 1


def deps_tag(tag: str) -> str:
    """Tag of the first build stage (torch and the dependencies), kept as the build cache of ``tag``."""
    from docker.utils import parse_repository_tag

    repo, version = parse_repository_tag(tag)
    if version and version.startswith("sha256:"):
        version = None
    return f"{repo}:{version or 'latest'}-deps"


def _dangling_ids(client) -> set[str]:
    try:
        return {img.id for img in client.images.list(filters={"dangling": True})}
    except Exception:  # noqa: BLE001 - an engine that cannot list: nothing to tidy
        return set()


def tidy_build(client, trace: BuildTrace, final_id: str | None, cache_tag: str | None) -> None:
    """Leave no ``<none>`` image behind from this build (only ids this build printed are touched).

    The legacy builder keeps the last image of every earlier stage untagged and childless: the first stage
    (the venv with torch) is the layer cache that makes a rebuild after a code change take seconds, so it
    is tagged ``<tag>-deps`` (the one it replaces is removed); after a failed build, the partial step
    images are removed.
    """
    keep = set()
    if final_id and cache_tag and trace.stage_ends:
        stage = _image_id(client, trace.stage_ends[0])  # also when a cached stage already has another tag
        if stage:
            previous = _image_id(client, cache_tag)
            repo, _, version = cache_tag.rpartition(":")
            try:
                client.images.get(stage).tag(repo, version)
                keep.add(stage)
                if previous and previous != stage:
                    drop_if_untagged(client, previous)
            except Exception:  # noqa: BLE001 - could not tag: removed below like the rest
                pass
    dangling = _dangling_ids(client)
    ours = {i for short in trace.ids for i in dangling if i.split(":", 1)[-1].startswith(short)}
    for image in ours - keep:
        drop_if_untagged(client, image)


def drop_if_untagged(client, image_id: str) -> None:
    """An image nothing names any more (the one a rebuild replaced, a stage cache): remove it and its untagged
    parents that nothing else uses, so no ``<none>`` image is left; shared layers stay cached."""
    try:
        img = client.images.get(image_id)
        if not img.tags:
            client.images.remove(image_id, noprune=False)
    except Exception:  # noqa: BLE001 - in use by a container or another image, or already gone: leave it
        pass
