"""``--dist loadgroup`` really keeps an ``xdist_group`` on one worker with this suite's conftest (tests/conftest.py
puts the group where pytest reads node ids; pytest-xdist 3.8 alone writes it where pytest 9.2 no longer looks, and
the groups were then silently ignored). Real pytest-xdist, two workers, in a scratch directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from enginelock import LOCKS_ENV

TESTS = Path(__file__).resolve().parents[1]
SUITE_FILES = ("conftest.py", "support/enginelock.py", "support/runreport.py")


def _own_run_env() -> dict[str, str]:
    """The scratch run's environment: without this run's engine lock directory (tests/conftest.py hands it to its
    workers through LOCKS_ENV), so the scratch run makes a lock of its own. With this run's, its
    engine_exclusive tests would wait for every engine test of this run and block new ones meanwhile."""
    return {k: v for k, v in os.environ.items() if k != LOCKS_ENV}


def _scratch_run(tmp_path: Path, modules: dict[str, str], workers: int) -> Path:
    """Run pytest-xdist (``--dist loadgroup``) with this suite's conftest on ``modules`` (file name -> text) in
    ``tmp_path``; returns the folder above its basetemp, where the scratch tests write what they saw."""
    for name in SUITE_FILES:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(TESTS / name, tmp_path / name)
    for name, text in modules.items():
        (tmp_path / name).write_text(text)
    base = tmp_path / "run" / "base"
    base.parent.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers),
                           "--dist", "loadgroup", f"--basetemp={base}", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_own_run_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return base.parent

GROUPED = '''
import os, time
import pytest

pytestmark = pytest.mark.xdist_group("{group}")


@pytest.mark.parametrize("i", range(4))
def test_where(i, tmp_path_factory):
    time.sleep(0.05)  # long enough that the other worker would take some of them if it could
    out = tmp_path_factory.getbasetemp().parent.parent / "seen.txt"
    with open(out, "a") as f:
        f.write(f"{group} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
'''


def test_each_group_runs_on_one_worker(tmp_path):
    run = _scratch_run(tmp_path, {f"test_{g}.py": GROUPED.format(group=g) for g in ("alpha", "beta")}, 2)
    seen: dict[str, set[str]] = {}
    for line in (run / "seen.txt").read_text().splitlines():
        group, worker = line.split()
        seen.setdefault(group, set()).add(worker)
    assert sorted(seen) == ["alpha", "beta"] and all(len(w) == 1 for w in seen.values()), seen


SHARED_SETUP = '''
import os, time
import pytest


@pytest.fixture(scope="module")
def costly(tmp_path_factory):
    out = tmp_path_factory.getbasetemp().parent.parent / "setups.txt"
    with open(out, "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return 42


@pytest.mark.parametrize("i", range(4))
def test_uses_it(i, costly):
    time.sleep(0.05)
    assert costly == 42


@pytest.mark.parametrize("i", range(4))
def test_does_not(i):
    time.sleep(0.05)
'''

TIMED = '''
import os, time
import pytest

pytestmark = pytest.mark.{mark}


@pytest.mark.parametrize("i", range({n}))
def test_span(i, tmp_path_factory):
    t0 = time.time()
    time.sleep(0.1)
    out = tmp_path_factory.getbasetemp().parent.parent / "spans.txt"
    with open(out, "a") as f:
        f.write(f"{mark} {{os.environ['PYTEST_XDIST_WORKER']}} {{t0}} {{time.time()}}\\n")
'''


def test_a_module_fixture_is_made_once_and_exclusive_tests_run_as_one_stretch(tmp_path):
    """Users of a module-scoped fixture share one worker (one set-up per run); the engine_exclusive tests of
    several modules run on one worker, back to back, and no engine test of another worker overlaps them."""
    run = _scratch_run(tmp_path, {"test_setup.py": SHARED_SETUP,
                                  "test_excl_a.py": TIMED.format(mark="engine_exclusive", n=2),
                                  "test_excl_b.py": TIMED.format(mark="engine_exclusive", n=2),
                                  "test_shared.py": TIMED.format(mark="docker", n=12)}, 3)
    assert len((run / "setups.txt").read_text().split()) == 1
    spans = [line.split() for line in (run / "spans.txt").read_text().splitlines()]
    excl = [(float(a), float(b)) for mark, _, a, b in spans if mark == "engine_exclusive"]
    assert len(excl) == 4 and len({w for mark, w, _, _ in spans if mark == "engine_exclusive"}) == 1, spans
    start, end = min(a for a, _ in excl), max(b for _, b in excl)
    shared = [(float(a), float(b)) for mark, _, a, b in spans if mark == "docker"]
    assert len(shared) == 12 and all(b <= start or a >= end for a, b in shared), (start, end, sorted(shared))


ORDERED = '''
import os
import pytest

pytestmark = [{marks}]


@pytest.mark.parametrize("i", range({n}))
def test_kind(i, tmp_path_factory):
    with open(tmp_path_factory.getbasetemp().parent.parent / "order.txt", "a") as f:
        f.write("{kind}\\n")
'''


def test_long_work_is_handed_out_first_and_the_exclusive_stretch_before_the_unit_tests(tmp_path):
    """One worker runs the units in the order they are handed out: service groups (most tests first), single
    engine and distributed tests (mixed), the engine_exclusive stretch, then plain tests."""
    kinds = {"plain": ("", 6), "small_group": ('pytest.mark.docker, pytest.mark.xdist_group("small")', 2),
             "big_group": ('pytest.mark.slurm, pytest.mark.xdist_group("big")', 4),
             "engine": ("pytest.mark.docker", 3), "dist": ("pytest.mark.distributed", 3),
             "exclusive": ("pytest.mark.engine_exclusive", 2)}
    run = _scratch_run(tmp_path, {f"test_{kind}.py": ORDERED.format(marks=marks, n=n, kind=kind)
                                  for kind, (marks, n) in kinds.items()}, 1)
    order = (run / "order.txt").read_text().split()
    assert order[:6] == ["big_group"] * 4 + ["small_group"] * 2, order
    assert sorted(order[6:12]) == ["dist"] * 3 + ["engine"] * 3, order
    assert order[12:] == ["exclusive"] * 2 + ["plain"] * 6, order
