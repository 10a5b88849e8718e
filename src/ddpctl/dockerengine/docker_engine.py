"""The Docker SDK adapter of :class:`ddpctl.local.engine_interface.Engine` (``docker`` is imported lazily)."""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Iterator

from ddpctl.dockerengine.host_address import DEFAULT_HOST, DockerHost
from ddpctl.errors import EngineError
from ddpctl.local.engine_interface import ContainerInfo, Engine, NetworkInfo, VolumeInfo


def _epoch(text: str | int | float | None) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    if not text:
        return 0.0
    # Docker gives RFC 3339 with nanoseconds: 2026-11-01T10:00:00.123456789Z
    head = text.rstrip("Z").split(".")[0]
    try:
        return _dt.datetime.fromisoformat(head).replace(tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return 0.0


def _filters(label: str | None, name: str | None) -> dict[str, Any]:
    """Docker list filters for a label and/or a name."""
    return {k: v for k, v in (("label", label), ("name", name)) if v}


def _named(items: list[dict], name: str | None) -> list[dict]:
    """Only the exact ``name`` (Docker's name filter matches substrings)."""
    return [i for i in items if not name or i["Name"] == name]


class DockerEngine(Engine):
    """Adapter over docker-py (the low-level ``APIClient`` where it streams)."""

    def __init__(self, client=None, host: DockerHost | None = None) -> None:
        self._client = client
        self.host = host  # None: DOCKER_HOST's engine
        self.name = host.given if host is not None else os.environ.get("DOCKER_HOST") or DEFAULT_HOST

    @property
    def client(self):
        """The client, connected on first use (:func:`ddpctl.dockerengine.connect`)."""
        if self._client is None:
            import ddpctl.dockerengine

            self._client = ddpctl.dockerengine.connect(self.host)
        return self._client

    @property
    def api(self):
        return self.client.api

    def _errors(self):
        import docker

        return docker.errors

    def ping(self) -> None:
        self.client  # noqa: B018 - connecting pings

    def check(self, endpoint: str | None = None, timeout: float = 5.0, *, fresh: bool = False) -> None:
        """A ping of the connected engine, bounded by ``timeout`` (the client's own timeout is 600 s). ``fresh``:
        the idle pooled connections are closed first, so the ping opens a new one: a daemon that is shutting
        down (SIGTERM: it closes its listener, then stops its containers) still answers on the old ones."""
        api = self.api
        if fresh:
            for adapter in list(api.adapters.values()):
                adapter.close()  # idle connections only: a stream in use keeps its own until it ends
        api._result(api._get(api._url("/_ping"), timeout=timeout))

    def events(self, endpoint: str, label: str) -> Iterator[Any]:
        return self.api.events(filters={"label": label}, decode=True)

    def image_exists(self, ref: str) -> bool:
        from ddpctl.dockerengine.tools import image_id

        return image_id(self.client, ref) is not None

    def has_nvidia_runtime(self, image: str | None = None) -> bool:
        """Can containers get NVIDIA GPUs? Yes with the engine's 'nvidia' runtime. Without it, Docker's own
        'nvidia' device driver may still serve GPU requests (dockerd registers it when
        nvidia-container-runtime-hook is on its PATH: nvidia-container-toolkit without 'nvidia-ctk runtime
        configure'), and only the daemon knows: a throwaway container of ``image`` with a one-GPU request is
        started and removed. An absent image answers True here: the image check reports it instead."""
        from ddpctl.dockerengine.tools import has_nvidia_runtime, remove_quietly

        if has_nvidia_runtime(self.client):
            return True
        if image is None or not self.image_exists(image):
            return image is not None
        from docker.types import DeviceRequest

        errors = self._errors()
        container = None
        try:
            container = self.client.containers.create(
                image, ["true"], entrypoint=[], network_mode="none",
                device_requests=[DeviceRequest(count=1, capabilities=[["gpu"]])])
            container.start()
            return True
        except errors.APIError as exc:
            text = str(getattr(exc, "explanation", None) or exc)
            if "could not select device driver" in text:
                return False
            if "executable file not found" in text:  # the GPU was attached; the image just has no `true`
                return True
            raise EngineError(f"a container with a GPU request does not start on this engine: {text[:300]}",
                              "check the NVIDIA driver and nvidia-container-toolkit on the Docker host") from None
        finally:
            remove_quietly(container)

    def pull_image(self, ref: str) -> None:
        from docker.utils import parse_repository_tag

        repo, tag = parse_repository_tag(ref)  # "repo:tag", "repo@sha256:..." or "repo" (latest)
        self.client.images.pull(repo, tag=tag or "latest")

    def create_network(self, name: str, labels: dict[str, str]) -> str:
        net = self.client.networks.create(name, driver="bridge", labels=labels, check_duplicate=True)
        return net.id

    def remove_network(self, id_or_name: str) -> None:
        try:
            self.api.remove_network(id_or_name)
        except self._errors().NotFound:
            pass

    def networks(self, label: str | None = None, name: str | None = None) -> list[NetworkInfo]:
        return [NetworkInfo(n["Id"], n["Name"], dict(n.get("Labels") or {}))
                for n in _named(self.api.networks(filters=_filters(label, name)), name)]

    def create_volume(self, name: str, labels: dict[str, str]) -> str:
        return self.api.create_volume(name, driver="local", labels=labels)["Name"]

    def remove_volume(self, name: str) -> None:
        try:
            self.api.remove_volume(name, force=True)
        except self._errors().NotFound:
            pass

    def volumes(self, label: str | None = None, name: str | None = None) -> list[VolumeInfo]:
        found = (self.api.volumes(filters=_filters(label, name)) or {}).get("Volumes") or []
        return [VolumeInfo(v["Name"], dict(v.get("Labels") or {})) for v in _named(found, name)]

    def chown_volume(self, name: str, image: str, owner: str, target: str) -> None:
        from docker.types import Mount

        container = self.client.containers.create(
            image, [owner, target], entrypoint=["chown"], user="0:0", network_mode="none",
            mounts=[Mount(target, name, type="volume")], labels={"app.kubernetes.io/managed-by": "ddpctl"})
        try:
            container.start()
            code = int(container.wait().get("StatusCode", 1))
            if code != 0:
                out = container.logs().decode("utf-8", "replace").strip().splitlines()
                raise EngineError(f"could not give the checkpoint volume {name} to user {owner} "
                                  f"({out[-1] if out else f'chown exited {code}'})",
                                  "run the job as root (--user 0) or mount a directory of yours at " + target)
        finally:
            try:
                container.remove(force=True)
            except self._errors().APIError:
                pass

    def create_container(self, request: dict[str, Any]) -> str:
        from docker.types import DeviceRequest, Mount, Ulimit

        kw = dict(request)
        kw["ulimits"] = [Ulimit(**u) for u in kw.get("ulimits", [])]
        if "mounts" in kw:
            kw["mounts"] = [Mount(m["target"], m["source"], type=m["type"], read_only=m["read_only"])
                            for m in kw["mounts"]]
        if "device_requests" in kw:
            kw["device_requests"] = [DeviceRequest(**d) for d in kw["device_requests"]]
        image = kw.pop("image")
        command = kw.pop("command")
        container = self.client.containers.create(image, command, detach=True, **kw)
        return container.id

    def start(self, cid: str) -> None:
        self.api.start(cid)

    def _info(self, attrs: dict) -> ContainerInfo:
        state = attrs.get("State") or {}
        return ContainerInfo(
            id=attrs["Id"], name=attrs["Name"].lstrip("/"), labels=dict(attrs["Config"].get("Labels") or {}),
            state=state.get("Status", "unknown"),
            exit_code=state.get("ExitCode") if state.get("Status") in ("exited", "dead") else None,
            created=_epoch(attrs.get("Created")), oom_killed=bool(state.get("OOMKilled")),
            command=tuple(str(a) for a in ([attrs.get("Path")] if attrs.get("Path") else [])
                          + list(attrs.get("Args") or [])),
            mounts=tuple((str(m.get("Type", "")), str(m.get("Name") or m.get("Source") or ""),
                          str(m.get("Destination", ""))) for m in attrs.get("Mounts") or []),
        )

    def containers(self, label: str | None = None, name: str | None = None) -> list[ContainerInfo]:
        filters: dict[str, Any] = {}
        if label:
            filters["label"] = label
        if name:
            filters["name"] = f"^/{name}$"
        out = []
        for c in self.api.containers(all=True, filters=filters):
            info = self.inspect(c["Id"])
            if info is not None:
                out.append(info)
        return sorted(out, key=lambda i: (i.labels.get("ddpctl.job", ""), i.name))

    def inspect(self, cid: str) -> ContainerInfo | None:
        try:
            return self._info(self.api.inspect_container(cid))
        except self._errors().NotFound:
            return None

    def logs(self, cid: str, *, follow: bool = False, tail: int | None = None, since: float | None = None,
             timestamps: bool = False) -> Iterator[bytes]:
        kw: dict[str, Any] = {"stdout": True, "stderr": True, "timestamps": timestamps, "follow": follow}
        if tail is not None:
            kw["tail"] = tail
        if since is not None:
            kw["since"] = float(since) if since > 0 else 1  # fractional seconds: a re-attach resumes mid-second
        if follow:
            return self.api.logs(cid, stream=True, **kw)  # each line as it comes
        from ddpctl.dockerengine.log_stream import read_logs

        params = {"stdout": 1, "stderr": 1, "timestamps": int(timestamps), "tail": "all" if tail is None else tail}
        if "since" in kw:
            params["since"] = kw["since"]
        return read_logs(self.api, cid, params)  # in 1 MiB blocks: never all of it in memory

    def get_archive(self, cid: str, path: str) -> Iterator[bytes]:
        return self.api.get_archive(cid, path)[0]

    def wait(self, cid: str) -> int:
        try:
            return int(self.api.wait(cid).get("StatusCode", 1))
        except self._errors().NotFound:
            return 1

    def stop(self, cid: str, timeout: int = 5) -> None:
        try:
            self.api.stop(cid, timeout=timeout)
        except self._errors().NotFound:
            pass
        except self._errors().APIError as exc:
            raise EngineError(f"could not stop container {cid[:12]} ({exc.explanation})",
                              "try 'docker rm -f' on it") from None

    def remove_container(self, cid: str) -> None:
        try:
            self.api.remove_container(cid, force=True, v=True)
        except self._errors().NotFound:
            pass
        except self._errors().APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc.explanation):
                return
            raise
