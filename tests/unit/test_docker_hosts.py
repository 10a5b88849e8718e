"""Docker hosts for ``ddpctl up --docker-hosts``: URL and context parsing, TLS, the address of each host, and
the HostsEngine's routing and all-or-nothing creation across hosts (against an in-memory engine; the real
engines are in tests/integration/test_two_hosts.py)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from ddpctl.dockerengine import host_address as dh
from ddpctl.dockerengine.hosts_engine import HostsEngine, NamedEngine
from ddpctl.errors import EngineError, SpecError, UsageError
from ddpctl.local import executor
from ddpctl.local.engine_interface import ContainerInfo, Engine, NetworkInfo
from ddpctl.local.plan import plan_local
from ddpctl.spec import load_spec


@pytest.mark.parametrize("url, address", [
    ("tcp://10.0.0.5:2376", "10.0.0.5"),
    ("tcp://gpu1.example.org", "gpu1.example.org"),
    ("ssh://me@gpu2:2222", "gpu2"),
    ("ssh://gpu3", "gpu3"),
    ("unix:///var/run/docker.sock", None),
])
def test_urls_and_their_addresses(url, address):
    host = dh.resolve(url)
    assert host.url == url and host.address == address and host.context is None


@pytest.mark.parametrize("given, message", [
    ("http://h:2375", "has scheme 'http', not one of unix, tcp, ssh"),
    ("unix://relative.sock", "is not an absolute socket path"),
    ("tcp://:2376", "names no host"),
    ("tcp://h:notaport", "is not a valid URL"),
    ("ssh://me@h/path", "names no host (or has a path)"),
    ("bad name!", "is neither a URL nor a context name"),
])
def test_bad_urls_are_usage_errors(given, message):
    with pytest.raises(UsageError) as info:
        dh.resolve(given)
    assert message in str(info.value)


def test_split_hosts_refuses_a_repeat():
    assert dh.split_hosts(" a , b,,") == ("a", "b")
    with pytest.raises(UsageError, match="lists a twice"):
        dh.split_hosts("a,b,a")


def test_contexts_come_from_docker_config(tmp_path, monkeypatch):
    """A context written the way the docker CLI writes it (meta.json under DOCKER_CONFIG/contexts)."""
    import hashlib

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no config.json: the docker CLI does not need one
    digest = hashlib.sha256(b"gpu1").hexdigest()
    meta = tmp_path / "contexts" / "meta" / digest
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(json.dumps({"Name": "gpu1", "Metadata": {}, "Endpoints": {
        "docker": {"Host": "tcp://10.1.2.3:2376", "SkipTLSVerify": False}}}))
    host = dh.resolve("gpu1")
    assert (host.url, host.context, host.address) == ("tcp://10.1.2.3:2376", "gpu1", "10.1.2.3")
    assert "tls" not in dh.client_kwargs(host, environ={})
    tls = tmp_path / "contexts" / "tls" / digest / "docker"
    tls.mkdir(parents=True)
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tls / name).write_text("x")
    kw = dh.client_kwargs(host, environ={})
    assert kw["base_url"] == "tcp://10.1.2.3:2376" and kw["tls"].ca_cert == str(tls / "ca.pem")
    assert kw["tls"].cert == (str(tls / "cert.pem"), str(tls / "key.pem"))
    with pytest.raises(UsageError, match="no docker context named 'gpu2'"):
        dh.resolve("gpu2")


def test_tcp_tls_from_the_environment(tmp_path):
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    kw = dh.client_kwargs(dh.resolve("tcp://10.0.0.5:2376"),
                          environ={"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(tmp_path)})
    assert kw["base_url"] == "tcp://10.0.0.5:2376"
    tls = kw["tls"]
    assert tls.verify is True and tls.ca_cert == str(tmp_path / "ca.pem") and tls.cert == (str(tmp_path / "cert.pem"),
                                                                      str(tmp_path / "key.pem"))
    assert "tls" not in dh.client_kwargs(dh.resolve("tcp://10.0.0.5:2375"), environ={})
    assert dh.client_kwargs(dh.resolve("ssh://me@h"), environ={}) == {"base_url": "ssh://me@h"}


def test_spec_rules():
    spec = load_spec(None, {"nodes": 2, "docker_hosts": "tcp://a:2376,tcp://b:2376"})
    assert spec.network == "host" and spec.nodes_per_host == 1  # host networking by default
    with pytest.raises(SpecError, match="lists 2 Docker host"):
        load_spec(None, {"nodes": 3, "docker_hosts": "tcp://a:2376,tcp://b:2376"})
    with pytest.raises(SpecError, match="must be host for nodes on several Docker hosts"):
        load_spec(None, {"nodes": 2, "network": "bridge", "docker_hosts": "tcp://a:2376,tcp://b:2376"})


# ----------------------------------------------------------------------------------- the HostsEngine

_ids = itertools.count()


class MemoryEngine(Engine):
    """An engine that keeps containers in a dict; ``fail_create`` / ``fail_start`` make those calls fail."""

    def __init__(self, fail_create: bool = False, fail_start: bool = False) -> None:
        self.box: dict[str, dict[str, Any]] = {}
        self.fail_create, self.fail_start = fail_create, fail_start

    def ping(self) -> None: ...
    def image_exists(self, ref: str) -> bool: return True
    def has_nvidia_runtime(self, image: str | None = None) -> bool: return False
    def create_network(self, name, labels): raise AssertionError("no networks with host networking")
    def remove_network(self, id_or_name) -> None: ...
    def networks(self, label=None, name=None) -> list[NetworkInfo]: return []
    def create_volume(self, name, labels): raise AssertionError("no checkpoint volume without max_restarts")
    def remove_volume(self, name) -> None: ...
    def volumes(self, label=None, name=None): return []
    def chown_volume(self, name, image, owner, target) -> None: ...

    def create_container(self, request):
        if self.fail_create:
            raise RuntimeError("disk full")
        cid = f"{next(_ids):064x}"
        self.box[cid] = {"name": request["name"], "labels": dict(request["labels"]), "state": "created"}
        return cid

    def start(self, cid):
        if self.fail_start:
            raise RuntimeError("boom")
        self.box[cid]["state"] = "running"

    def _info(self, cid):
        c = self.box[cid]
        return ContainerInfo(cid, c["name"], c["labels"], c["state"])

    def containers(self, label=None, name=None):
        key, _, value = (label or "").partition("=")
        return [self._info(cid) for cid, c in self.box.items()
                if (not label or c["labels"].get(key) == value) and (not name or c["name"] == name)]

    def inspect(self, cid): return self._info(cid) if cid in self.box else None
    def logs(self, cid, **kw): return iter([f"log of {self.box[cid]['name']}\n".encode()])
    def wait(self, cid): return 0
    def stop(self, cid, timeout=5): self.box[cid]["state"] = "exited"
    def remove_container(self, cid): self.box.pop(cid, None)


def _plan(name="mh"):
    spec = load_spec(None, {"name": name, "nodes": 2, "docker_hosts": "tcp://a:2376,tcp://b:2376",
                            "hosts": "10.0.0.1,10.0.0.2"})
    return plan_local(spec, cwd=__import__("pathlib").Path("/"))


def test_node_i_goes_to_host_i_and_calls_follow_the_container():
    a, b = MemoryEngine(), MemoryEngine()
    engine = HostsEngine([NamedEngine("tcp://a:2376", a), NamedEngine("tcp://b:2376", b)])
    job = executor.up_hosts(_plan(), engine, environ={})
    assert [c["name"] for c in a.box.values()] == ["mh-node-0"] and [c["name"] for c in b.box.values()] == ["mh-node-1"]
    assert all(c["state"] == "running" for c in (*a.box.values(), *b.box.values()))
    rows = executor.list_nodes(HostsEngine([NamedEngine("A", a), NamedEngine("B", b)]), "mh")
    assert [(r.rank, r.host) for r in rows] == [(0, "A"), (1, "B")]
    assert b"log of mh-node-1" in b"".join(engine.logs(job.ids[1]))
    assert executor.remove_job(HostsEngine([NamedEngine("A", a), NamedEngine("B", b)]), "mh") == (2, 0, 0)
    assert not a.box and not b.box


def test_start_job_takes_an_engine_over_docker_hosts_through_the_hosts_preflight(monkeypatch):
    import ddpctl.host_gpus

    monkeypatch.setattr(ddpctl.host_gpus, "gpu_count", lambda *a: pytest.fail("this machine's GPUs were counted"))
    a, b = MemoryEngine(), MemoryEngine()
    engine = HostsEngine([NamedEngine("tcp://a:2376", a), NamedEngine("tcp://b:2376", b)])
    assert engine.node_per_host and executor.host_cpus(engine) is None  # each container sets its own threads
    started = executor.start_job(_plan(), engine)
    assert sorted(started.job.ids) == [0, 1] and len(a.box) == len(b.box) == 1
    with pytest.raises(UsageError, match=r"on Docker host\(s\) tcp://a:2376, tcp://b:2376"):
        executor.start_job(_plan(), engine)  # the hosts' clash check, not the single engine's


def test_the_job_engine_places_node_i_on_docker_host_i():
    from ddpctl.dockerengine import job_engine

    data = {"name": "mh", "nodes": 2, "docker_hosts": "tcp://10.0.0.1:2376,tcp://10.0.0.2:2376"}
    spec, engine = job_engine.for_spec(load_spec(None, data))  # nothing connects
    assert engine.node_per_host and engine.endpoints() == ("tcp://10.0.0.1:2376", "tcp://10.0.0.2:2376")
    assert spec.hosts == ("10.0.0.1", "10.0.0.2")  # node 0's address is the master
    spec, _ = job_engine.for_spec(load_spec(None, {**data, "hosts": "a,b"}))
    assert spec.hosts == ("a", "b")
    with pytest.raises(UsageError) as info:
        job_engine.for_spec(load_spec(None, {**data, "docker_hosts": "unix:///run/a.sock,tcp://10.0.0.2:2376"}))
    assert str(info.value).startswith("Docker host unix:///run/a.sock is a socket on this machine")
    assert "--hosts ADDR,ADDR" in str(info.value)
    plain = load_spec(None, {"name": "one", "nodes": 2})
    spec, engine = job_engine.for_spec(plain)
    assert spec is plain and not engine.node_per_host and engine.endpoints() == (engine.name,)
    assert job_engine.for_hosts(" tcp://a:2376, tcp://b:2376").endpoints() == ("tcp://a:2376", "tcp://b:2376")
    assert not job_engine.for_hosts("").node_per_host
    with pytest.raises(UsageError, match="lists tcp://a:2376 twice"):
        job_engine.for_hosts("tcp://a:2376,tcp://a:2376")


@pytest.mark.parametrize("fail", ["create", "start"])
def test_a_failure_on_the_second_host_removes_the_first_hosts_node(fail):
    a, b = MemoryEngine(), MemoryEngine(fail_create=fail == "create", fail_start=fail == "start")
    engine = HostsEngine([NamedEngine("tcp://a:2376", a), NamedEngine("tcp://b:2376", b)])
    with pytest.raises(EngineError, match="nothing was left behind"):
        executor.up_hosts(_plan(), engine, environ={})
    assert not a.box and not b.box


def test_a_running_job_on_any_host_is_a_clash():
    a, b = MemoryEngine(), MemoryEngine()
    executor.up_hosts(_plan(), HostsEngine([NamedEngine("A", a), NamedEngine("B", b)]), environ={})
    with pytest.raises(UsageError, match=r"already running \(2 container\(s\) on Docker host\(s\) A, B\)"):
        executor.up_hosts(_plan(), HostsEngine([NamedEngine("A", a), NamedEngine("B", b)]), environ={})


def test_missing_image_is_pulled_and_a_failed_pull_names_the_host():
    class NoImage(MemoryEngine):
        def __init__(self) -> None:
            super().__init__()
            self.pulled: list[str] = []

        def image_exists(self, ref): return ref in self.pulled

        def pull_image(self, ref):
            if ref.startswith("private/"):
                raise RuntimeError("pull access denied for private/x")
            self.pulled.append(ref)

    said: list[str] = []
    a, b = NoImage(), NoImage()
    engine = HostsEngine([NamedEngine("tcp://a:2376", a), NamedEngine("ssh://me@b", b)])
    host = engine.only(("ssh://me@b",))  # each host on its own, as the preflight sees it
    executor.ensure_image(host, "ddpctl/ddp-train:cpu", said.append)
    assert b.pulled == ["ddpctl/ddp-train:cpu"] and a.pulled == []
    assert said == ["image ddpctl/ddp-train:cpu is not on Docker host ssh://me@b: pulling it there"]
    with pytest.raises(UsageError) as info:
        executor.ensure_image(host, "private/x:1")
    text = str(info.value)
    assert "image private/x:1 is not on Docker host ssh://me@b and pulling it there failed" in text
    assert "docker save private/x:1 | docker -H ssh://me@b load" in text
    ctx = HostsEngine([NamedEngine("gpu2", NoImage())])
    with pytest.raises(UsageError, match="docker --context gpu2 load"):
        executor.ensure_image(ctx, "private/x:1")


def test_restarts_on_several_hosts_need_a_shared_checkpoint_directory():
    a, b = MemoryEngine(), MemoryEngine()
    engine = HostsEngine([NamedEngine("A", a), NamedEngine("B", b)])
    spec = load_spec(None, {"name": "mh", "nodes": 2, "docker_hosts": "tcp://a:2376,tcp://b:2376",
                            "hosts": "10.0.0.1,10.0.0.2", "max_restarts": 2})
    with pytest.raises(UsageError, match="needs one checkpoint directory all of them see"):
        executor.up_hosts(plan_local(spec, cwd=__import__("pathlib").Path("/")), engine, environ={})
    assert not a.box and not b.box


def test_tensorboard_on_several_hosts_needs_a_shared_checkpoint_directory():
    a, b = MemoryEngine(), MemoryEngine()
    engine = HostsEngine([NamedEngine("A", a), NamedEngine("B", b)])
    data = {"name": "mh", "nodes": 2, "docker_hosts": "tcp://a:2376,tcp://b:2376", "hosts": "10.0.0.1,10.0.0.2",
            "tensorboard": True}
    with pytest.raises(UsageError) as info:
        executor.up_hosts(plan_local(load_spec(None, data), cwd=__import__("pathlib").Path("/")), engine, environ={})
    assert str(info.value).startswith("--tensorboard on several Docker hosts needs one checkpoint directory")
    assert "drop --tensorboard" in str(info.value) and "--max-restarts" not in str(info.value)
    assert not a.box and not b.box
    shared = plan_local(load_spec(None, {**data, "volumes": ["/shared/ckpt:/checkpoints"]}), cwd=__import__("pathlib").Path("/"))
    assert shared.checkpoint_volume is None and shared.containers[1].argv[-2:] == ("--tensorboard", "/checkpoints/tensorboard")
