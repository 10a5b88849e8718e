"""``--dist loadgroup`` really keeps an ``xdist_group`` on one worker with this suite's conftest (tests/conftest.py
puts the group where pytest reads node ids; pytest-xdist 3.8 alone writes it where pytest 9.2 no longer looks, and
the groups were then silently ignored). Real pytest-xdist, two workers, in a scratch directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

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
    for name in ("conftest.py", "enginelock.py"):
        shutil.copy(TESTS / name, tmp_path / name)
    for group in ("alpha", "beta"):
        (tmp_path / f"test_{group}.py").write_text(GROUPED.format(group=group))
    base = tmp_path / "run" / "base"
    base.parent.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", f"--basetemp={base}", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seen: dict[str, set[str]] = {}
    for line in (tmp_path / "run" / "seen.txt").read_text().splitlines():
        group, worker = line.split()
        seen.setdefault(group, set()).add(worker)
    assert sorted(seen) == ["alpha", "beta"] and all(len(w) == 1 for w in seen.values()), seen
