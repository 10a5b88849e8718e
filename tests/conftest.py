"""Suite-wide rules for running the tests in parallel (pytest-xdist, ``make test``: ``-n N --dist loadgroup``).

Tests that use the Docker Engine (marker ``docker``) or the Slurm cluster (``slurm``) hold a *shared* engine
lock from the start of their set-up to the end of their tear-down; a test marked ``engine_exclusive`` (it
compares a snapshot of the whole engine, e.g. every image or container before and after) holds it *exclusively*,
so no other test of this run creates or removes anything on the engine meanwhile. The lock is a file under a
directory the controlling process makes for the run (``PYTEST_ENGINE_LOCKS``, removed at its end); an exclusive
request closes a gate first so that new shared holders wait behind it instead of starving it. Without xdist
(one process) the lock is taken all the same and never waits.

Tests that share a service or fixed machine state (one Slurm cluster, the second dockerd with its fixed bridge,
the two-host network namespaces) carry ``pytest.mark.xdist_group(name)``: ``--dist loadgroup`` runs each group
on one worker, so its session/module fixtures start once per run. Two kinds of group are added here without a
mark: the users of a module- or class-scoped fixture (group ``<module path>``) and the ``engine_exclusive``
tests (group ``engine_exclusive``, run as one exclusive stretch): see ``_group_shared_setup``. The work units
are handed out longest first, the exclusive stretch before the unit tests: see ``_schedule_order``.

Every test run keeps the output of the jobs it ends (ddpctl.joboutput.kept_output) in a directory of its own, never in
the user's state directory: XDG_STATE_HOME points into a temporary directory for the whole session (each xdist
worker has its own; ddpctl processes the tests start inherit it), removed when the session ends.

The helper modules the tests share live in tests/support/ and are imported by their bare names: this conftest
puts that folder on sys.path first.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The tests' helper modules (tests/support/) are imported by bare name (``import itest_helpers``) from every test
# directory; this is the one place that puts them on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from enginelock import LOCKS_ENV, engine_lock  # noqa: E402
from runreport import RunReport  # noqa: E402

_STATE = tempfile.mkdtemp(prefix="ddpctl-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)


def pytest_configure(config):
    if not hasattr(config, "workerinput") and not os.environ.get(LOCKS_ENV):
        # the controlling process (or a plain run): workers inherit the directory through the environment
        path = tempfile.mkdtemp(prefix="ddpctl-test-locks-")
        os.environ[LOCKS_ENV] = path
        config._ddpctl_locks_made = path
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(RunReport(config), "ddpctl-runreport")
        if getattr(config.option, "dist", "no") == "loadgroup":
            config.option.loadscopereorder = False  # the order is this suite's: _schedule_order


def pytest_unconfigure(config):
    made = getattr(config, "_ddpctl_locks_made", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(LOCKS_ENV, None)


@pytest.hookimpl(trylast=True)  # after every conftest (and pytest-xdist) has marked the items
def pytest_collection_modifyitems(config, items):
    """pytest-xdist (3.8) sends an ``xdist_group`` to its scheduler as a ``@GROUP`` suffix of the test's node id,
    which it writes to ``item._nodeid``; pytest 9.2 reads node ids from ``item._id``, so without this the groups
    are silently ignored (every Slurm test would start a cluster of its own on whichever worker). In a worker
    under ``--dist loadgroup`` only; a no-op once the suffix is there."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        _group_shared_setup(item)
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")
    _schedule_order(items)


_HEAVY = ("docker", "slurm", "distributed", "slow")


def _schedule_order(items) -> None:
    """Order the run's work units (a group, else one test) for ``--dist loadgroup``, which hands them out in the
    order collected (pytest_configure turns pytest-xdist's own reordering off), so that the longest come first
    and the run ends on short tests instead of one long test started late on one worker:

    0. groups with a test that uses a service or processes (Docker, Slurm, torch.distributed), most tests first;
    1. other single tests that use the engine, the Slurm cluster or torch.distributed, or are marked slow (mixed:
       the engine's tests wait on dockerd, the others on the CPU);
    2. the engine_exclusive stretch: by then the other workers run tests that do not hold the engine lock, so it
       waits for few tests and holds back few;
    3. the rest (unit and CLI tests, pure-Python groups).

    A stable sort: within a tier the random order (pytest-randomly, seeded) stays."""
    def unit(item) -> str:
        return item.nodeid.rsplit("@", 1)[1] if "@" in item.nodeid else item.nodeid

    size: dict[str, int] = {}
    heavy: set[str] = set()
    for item in items:
        size[unit(item)] = size.get(unit(item), 0) + 1
        if any(item.get_closest_marker(m) for m in _HEAVY):
            heavy.add(unit(item))

    def key(item) -> tuple[int, int]:
        u = unit(item)
        if item.get_closest_marker("engine_exclusive"):
            return (2, 0)
        if size[u] > 1:
            return (0, -size[u]) if u in heavy else (3, 0)
        return (1, 0) if u in heavy else (3, 0)

    items.sort(key=key)


def _group_shared_setup(item) -> None:
    """Tests that share a costly set-up run on one worker, so it is made once per run instead of once per worker:

    - a module- or class-scoped fixture (a build and push, a second dockerd, a training run whose results several
      tests read): its users go to the group ``<module path>``, unless they are in a group already;
    - ``engine_exclusive`` tests go to the group ``engine_exclusive`` and run back to back, holding the engine
      lock from the first one's set-up to the last one's tear-down: the other workers wait for one exclusive
      stretch per run instead of one per test (see pytest_runtest_teardown)."""
    if item.get_closest_marker("xdist_group"):
        return
    if item.get_closest_marker("engine_exclusive"):
        item.add_marker(pytest.mark.xdist_group("engine_exclusive"))
        return
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        if defs and defs[-1].scope in ("module", "class"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
            return


def _mode(item) -> str | None:
    if item.get_closest_marker("engine_exclusive"):
        return "exclusive"
    if item.get_closest_marker("docker") or item.get_closest_marker("slurm"):
        return "shared"
    return None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    mode = _mode(item)
    if mode == "exclusive":
        engine_lock().exclusive()
    elif mode == "shared":
        engine_lock().shared()
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # module and session fixtures end inside the last item's tear-down: still under the lock
    if _mode(item) == "exclusive" and nextitem is not None and _mode(nextitem) == "exclusive":
        return  # the next test (its group: engine_exclusive) keeps the lock: no other test starts in between
    if _mode(item) is not None:
        engine_lock().release()
