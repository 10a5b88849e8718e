"""Integration tests on the real Docker Engine (marker ``docker``).

They need a running engine and the CPU image ``ddpctl/ddp-train:cpu``; ``make test`` provides both
(scripts/ci-setup.sh, make image-cpu). Without an engine the tests are skipped, unless
DDPCTL_REQUIRE_DOCKER=1 (set by ``make test``), which turns a missing engine into a failure.

A session fixture checks that no container, network or volume with ddpctl's labels is left when the tests end:
every one created since the session began counts, except those of another test session's fixture job names
(``t`` + 8 hex digits with another session's 3-digit prefix: the engine may be shared, e.g. a developer's run
beside CI), so a leftover of this session cannot hide and another's cannot fail it. Each pytest-xdist worker is
a session of its own (its own prefix); it checks under the run's exclusive engine lock (tests/support/enginelock.py),
so no other worker of the run is half-way through a test then.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from enginelock import engine_lock
from itest_helpers import CPU_IMAGE, MANAGED, ddpctl, missing_part


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


LEFTOVER_WAIT = 30  # seconds
SESSION = uuid.uuid4().hex[:3]  # this test session's prefix of fixture job names
_FIXTURE_JOB = re.compile(r"^t([0-9a-f]{3})[0-9a-f]{5}")


def _created(stamp: str) -> float:
    """Seconds since the epoch of a Docker 'Created' time (RFC 3339, nanoseconds); unreadable: counts as new."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", stamp or "")
    if not m:
        return float("inf")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    t = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return t + float("0." + (m.group(2) or "0"))


def _other_session(attrs: dict) -> bool:
    labels = attrs.get("Labels") or (attrs.get("Config") or {}).get("Labels") or {}
    m = _FIXTURE_JOB.match(labels.get("ddpctl.job", ""))
    return bool(m) and m.group(1) != SESSION


@pytest.fixture(scope="session")
def engine():
    problem = _engine_ok()
    if problem:
        missing_part(f"no Docker Engine ({problem}); run scripts/ci-setup.sh")
    import docker

    client = docker.from_env()
    began = datetime.now(timezone.utc).timestamp() - 1
    yield client

    def ours(attrs: dict, created: str) -> bool:
        return _created(attrs.get(created, "")) >= began and not _other_session(attrs)

    def left() -> tuple[list[str], list[str], list[str]]:
        return ([c.name for c in client.containers.list(all=True, filters={"label": MANAGED})
                 if ours(c.attrs, "Created")],
                [n.name for n in client.networks.list(filters={"label": MANAGED}) if ours(n.attrs, "Created")],
                [v.name for v in client.volumes.list(filters={"label": MANAGED}) if ours(v.attrs, "CreatedAt")])

    with engine_lock().exclusively():  # no other worker of this run is half-way through a test meanwhile
        # what carries no job name (`image check`'s probe container, say) cannot be told from another session's;
        # such a one lives seconds, a leftover stays: what is still there after LEFTOVER_WAIT s counts
        deadline = time.monotonic() + LEFTOVER_WAIT
        leftovers, nets, vols = left()
        while (leftovers or nets or vols) and time.monotonic() < deadline:
            time.sleep(1)
            leftovers, nets, vols = left()
    assert not leftovers and not nets and not vols, \
        f"ddpctl left containers {leftovers} / networks {nets} / volumes {vols} ({LEFTOVER_WAIT} s after the tests)"


@pytest.fixture(scope="session")
def cpu_image(engine):
    try:
        engine.images.get(CPU_IMAGE)
    except Exception:  # noqa: BLE001
        pytest.fail(f"{CPU_IMAGE} is missing: build it with 'make image-cpu'")
    return CPU_IMAGE


CUDA_IMAGE = os.environ.get("DDPCTL_TEST_CUDA_IMAGE", "ddpctl/ddp-train:cuda-local")


@pytest.fixture(scope="session")
def cuda_image(engine):
    """The CUDA image made with no registry (``make image-cuda-local``, which ``make test`` runs first: built
    once per machine, then reused by content). Tests using it carry the marker ``cuda_image``."""
    try:
        engine.images.get(CUDA_IMAGE)
    except Exception:  # noqa: BLE001
        message = f"{CUDA_IMAGE} is missing: build it with 'make image-cuda-local'"
        missing_part(message)
    return CUDA_IMAGE


@pytest.fixture
def job_name(engine):
    """A unique job name; the job is removed afterwards whatever the test did."""
    name = f"t{SESSION}{uuid.uuid4().hex[:5]}"
    yield name
    ddpctl("down", name)



def _registry(tmp_path_factory, engine, **kw):
    import registry as reg

    reg.require(engine, kw.get("host", "127.0.0.1"))
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
