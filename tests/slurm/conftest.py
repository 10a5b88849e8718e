"""Tests on a real one-machine Slurm cluster (marker ``slurm``): munged, slurmctld and two slurmd.

Every test here runs in the xdist group ``slurm``: on one worker, so the cluster starts once per test run.
The session fixture ``slurm_cluster`` starts the daemons from a generated slurm.conf under a temporary
directory (see cluster.py) and stops them afterwards. It needs root (slurmd runs jobs as their user) and
Debian's ``slurm-wlm`` and ``munge`` (``scripts/ci-setup-slurm.sh`` installs them; ``make test`` runs it).
Without them the tests are skipped, unless DDPCTL_REQUIRE_SLURM=1 or DDPCTL_REQUIRE_DOCKER=1 (set by
``make test``: CI must run on the real engines), which turns a missing Slurm into a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import cluster


def _required() -> bool:
    return "1" in (os.environ.get("DDPCTL_REQUIRE_SLURM"), os.environ.get("DDPCTL_REQUIRE_DOCKER"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.slurm)
            # one cluster per test run: every Slurm test on the worker that started it (--dist loadgroup)
            item.add_marker(pytest.mark.xdist_group("slurm"))


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    problem = None
    if os.geteuid() != 0:
        problem = "not root (slurmd and munged need root here)"
    elif cluster.missing_binaries():
        problem = (f"Slurm/munge not installed (missing {', '.join(cluster.missing_binaries())}); "
                   "run scripts/ci-setup-slurm.sh")
    if problem:
        if _required():
            pytest.fail(f"no Slurm: {problem}")
        pytest.skip(f"no Slurm: {problem}")
    cluster.ensure_hosts()
    c = cluster.SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    c.stop()
    assert not c.procs


@pytest.fixture(autouse=True)
def _slurm_test_isolated(request):
    """Around each test that uses the cluster: every slurmd alive before it (one that died during an earlier test
    is started again, with a warning), and no job of its left after it (a test that failed or timed out may
    leave its job queued or running; it is cancelled, with a warning), so one failure stays in the test where it
    happened instead of leaving every later two-node job pending."""
    import warnings

    if "slurm_cluster" not in request.fixturenames:
        yield
        return
    c = request.getfixturevalue("slurm_cluster")
    restarted = c.heal()
    if restarted:
        warnings.warn(f"{', '.join(restarted)} had died during an earlier test and was started again", stacklevel=1)
    yield
    left = c.cancel_all()
    if left:
        warnings.warn(f"job(s) {', '.join(left)} were still in the queue after the test: cancelled", stacklevel=1)
