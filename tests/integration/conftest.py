"""Integration tests on the real Docker Engine (marker ``docker``).

They need a running engine and the CPU image ``ddpctl/ddp-train:cpu``; ``make test`` provides both
(scripts/ci-setup.sh, make image-cpu). Without an engine the tests are skipped, unless
DDPCTL_REQUIRE_DOCKER=1 (set by ``make test``), which turns a missing engine into a failure.

A session fixture checks that no container, network or volume with ddpctl's labels is left when the tests end.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from itest_helpers import CPU_IMAGE, MANAGED, ddpctl


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.docker)


def _engine_ok() -> str | None:
    try:
        import docker

        docker.from_env().ping()
        return None
    except Exception as exc:  # noqa: BLE001
        return str(exc).splitlines()[0]


@pytest.fixture(scope="session")
def engine():
    problem = _engine_ok()
    if problem:
        if os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"no Docker Engine ({problem}); run scripts/ci-setup.sh")
        pytest.skip(f"no Docker Engine ({problem})")
    import docker

    client = docker.from_env()
    yield client
    leftovers = [c.name for c in client.containers.list(all=True, filters={"label": MANAGED})]
    nets = [n.name for n in client.networks.list(filters={"label": MANAGED})]
    vols = [v.name for v in client.volumes.list(filters={"label": MANAGED})]
    assert not leftovers and not nets and not vols, \
        f"ddpctl left containers {leftovers} / networks {nets} / volumes {vols}"


@pytest.fixture(scope="session")
def cpu_image(engine):
    try:
        engine.images.get(CPU_IMAGE)
    except Exception:  # noqa: BLE001
        pytest.fail(f"{CPU_IMAGE} is missing: build it with 'make image-cpu'")
    return CPU_IMAGE


@pytest.fixture
def job_name(engine):
    """A unique job name; the job is removed afterwards whatever the test did."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    ddpctl("down", name)



def _registry(tmp_path_factory, engine, **kw):
    import registry as reg

    problem = reg.missing()
    if problem:
        if os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"no registry: {problem}")
        pytest.skip(f"no registry: {problem}")
    if kw.get("host", "127.0.0.1") == "127.0.0.1" and not reg.engine_trusts_loopback(engine):
        pytest.fail("the Docker Engine does not list 127.0.0.0/8 under insecure-registries (its default); "
                    "add it to /etc/docker/daemon.json")
    r = reg.Registry(tmp_path_factory.mktemp("registry"), **kw).start()
    return r


@pytest.fixture(scope="session")
def registry(tmp_path_factory, engine):
    """A real registry (Debian's docker-registry) on a free loopback port, stopped after the session."""
    r = _registry(tmp_path_factory, engine)
    yield r
    r.stop()


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory, engine):
    """The same with htpasswd auth: pushes need credentials in the Docker config."""
    r = _registry(tmp_path_factory, engine, auth=True)
    yield r
    r.stop()
