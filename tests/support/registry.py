"""A real image registry for the tests: Debian's ``docker-registry`` (the CNCF distribution registry, v2.8),
started as ``docker-registry serve CONFIG`` on a free loopback port with its own storage directory, and stopped
afterwards. ``scripts/ci-setup-registry.sh`` installs it.

The shared Docker Engine pushes to it over plain HTTP because 127.0.0.0/8 is in its insecure registries by
default (``docker info``: "Insecure Registries: 127.0.0.0/8"); :func:`engine_trusts_loopback` checks that. With
``auth=True`` the registry asks for htpasswd basic auth (user ``ddpctl``, password :data:`PASSWORD`): a push
without credentials in the Docker config is refused, as a real private registry does.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from ports import free_port

USER = "ddpctl"
PASSWORD = "registry-test-pw"
# bcrypt of PASSWORD (the registry's htpasswd backend reads only bcrypt); made once, a constant: no bcrypt
# module needed to run the tests
HTPASSWD = f"{USER}:$2b$12$kGZaKTspAJz8MLXqd2PZcuB32W7/LSdy5SIf0TWWwRZn3TkNMEB1q\n"


def missing() -> str | None:
    return None if shutil.which("docker-registry") else "docker-registry is not installed (scripts/ci-setup-registry.sh)"


def engine_trusts_loopback(client) -> bool:
    """Does the engine list 127.0.0.1 under its insecure registries (plain HTTP allowed)?"""
    cidrs = (client.info().get("RegistryConfig") or {}).get("InsecureRegistryCIDRs") or []
    return any(ipaddress.ip_address("127.0.0.1") in ipaddress.ip_network(c, strict=False) for c in cidrs)


def require(engine, host: str = "127.0.0.1") -> None:
    """A registry can run here (else itest_helpers.missing_part: skipped where docker-registry is not installed,
    a failure under `make test`) and the engine may push to it over plain HTTP (else a failure)."""
    import pytest

    from itest_helpers import missing_part

    problem = missing()
    if problem:
        missing_part(f"no registry: {problem}")
    if host == "127.0.0.1" and not engine_trusts_loopback(engine):
        pytest.fail("the Docker Engine does not list 127.0.0.0/8 under insecure-registries (its default); "
                    "add it to /etc/docker/daemon.json")


class Registry:
    def __init__(self, workdir: Path, *, host: str = "127.0.0.1", auth: bool = False, port: int | None = None,
                 keep_data: bool = False) -> None:
        self.workdir = workdir
        self.host = host
        self.auth = auth
        self.port = port or free_port(host)
        self.keep_data = keep_data  # a cached registry (testcache.py): its blobs stay for the next run
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> Registry:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = {"version": 0.1, "log": {"level": "warn", "accesslog": {"disabled": True}},
                  "storage": {"filesystem": {"rootdirectory": str(data)}, "delete": {"enabled": True}},
                  "http": {"addr": self.address}}
        if self.auth:
            (self.workdir / "htpasswd").write_text(HTPASSWD)
            config["auth"] = {"htpasswd": {"realm": "ddpctl-test", "path": str(self.workdir / "htpasswd")}}
        path = self.workdir / "config.yml"
        path.write_text(json.dumps(config))  # JSON is YAML
        self.log = open(self.workdir / "registry.log", "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(path)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {(self.workdir / 'registry.log').read_text()[-1000:]}")
            try:
                self._get("/v2/")
                return self
            except urllib.error.HTTPError:
                return self  # 401 with auth: it answers
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"docker-registry did not answer on {self.address} within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
        # the pushed blobs (the CUDA image's are gigabytes): pytest keeps the last runs' temporary directories,
        # so a machine that runs the suite often would keep several copies
        if not self.keep_data:
            shutil.rmtree(self.workdir / "data", ignore_errors=True)

    def _get(self, path: str) -> dict:
        req = urllib.request.Request(f"http://{self.address}{path}")
        if self.auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"{}")

    def tags(self, repository: str) -> list[str]:
        """The tags the registry holds for ``repository`` (none when it has no such repository)."""
        try:
            return sorted(self._get(f"/v2/{repository}/tags/list").get("tags") or [])
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise

    def read(self, path: str, accept: str = "") -> bytes:
        """GET ``path`` from the registry's HTTP API (v2), raw."""
        req = urllib.request.Request(f"http://{self.address}{path}")
        if accept:
            req.add_header("Accept", accept)
        if self.auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read()

    def image_blobs(self, repository: str, reference: str) -> tuple[dict, dict, list[bytes]]:
        """(manifest, config with its history, every layer blob) of a pushed image, as the registry stores them."""
        accept = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
        manifest = json.loads(self.read(f"/v2/{repository}/manifests/{reference}", accept))
        config = json.loads(self.read(f"/v2/{repository}/blobs/{manifest['config']['digest']}"))
        layers = [self.read(f"/v2/{repository}/blobs/{layer['digest']}") for layer in manifest["layers"]]
        return manifest, config, layers

    def docker_config(self, dest: Path) -> Path:
        """A Docker config directory with this registry's credentials (what 'docker login' writes)."""
        dest.mkdir(parents=True, exist_ok=True)
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        (dest / "config.json").write_text(json.dumps({"auths": {self.address: {"auth": token}}}))
        return dest


@contextlib.contextmanager
def kept(name: str, max_bytes: float, scratch: Path):
    """A real registry kept between runs (testcache.py entry ``name``) on the port it had last time, so the engine
    finds the layers it pushed there before (dockerd keeps, per registry address, which blob each layer became)
    and pushes only what is new: a manifest, or the layers a rebuilt image changed; a push to another repository
    of the same registry mounts the blobs it already holds. Past ``max_bytes`` of blobs (older images' layers)
    the data is dropped and the next push is whole. Without the entry (another session holds it,
    ``DDPCTL_TEST_CACHE=off``): a fresh registry under ``scratch``, removed after."""
    import testcache

    entry = testcache.Entry(name)
    if not entry.acquire():
        r = Registry(scratch).start()
        try:
            yield r
        finally:
            r.stop()
        return
    try:
        data = entry.path / "data"
        held = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) if data.exists() else 0
        if held > max_bytes:
            shutil.rmtree(data, ignore_errors=True)
        port_file = entry.path / "port"
        port = int(port_file.read_text()) if port_file.exists() else None
        try:
            r = Registry(entry.path, port=port, keep_data=True).start()
        except (RuntimeError, OSError):  # the kept port is taken now: another one (a whole push this time)
            r = Registry(entry.path, keep_data=True).start()
        port_file.write_text(str(r.port))
        try:
            yield r
        finally:
            r.stop()
    finally:
        entry.release()
