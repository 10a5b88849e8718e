"""`.ci/run`: a fresh clone of HEAD in a temporary path with a space and nothing beside it, `make test` run
there, pytest's exit status passed on (make's own when the tests did not run), the clone removed.

The real `make test` takes minutes (venv, engine, images, the whole suite), so here `make` is a stand-in
script first on PATH that records where and how it was called; `.ci/run` itself, git and the file system
are real. The full chain is what CI runs (docs/BENCHMARKS.md records its time).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_MAKE = """#!/usr/bin/env python3
import json, os, subprocess, sys
here = os.getcwd()
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
beside = sorted(os.listdir(os.path.dirname(here)))
with open(os.environ["FAKE_MAKE_LOG"], "w") as fh:
    json.dump({"argv": sys.argv[1:], "cwd": here, "head": head, "beside": beside,
               "files": sorted(os.listdir(here))}, fh)
if os.environ.get("FAKE_PYTEST_EXIT"):  # what the real test recipe does after pytest, before make fails
    with open(os.environ["PYTEST_EXIT_FILE"], "w") as fh:
        fh.write(os.environ["FAKE_PYTEST_EXIT"] + "\\n")
sys.exit(int(os.environ.get("FAKE_MAKE_EXIT", "0")))
"""


# (make's exit status, what the test recipe wrote as pytest's, what .ci/run must exit with)
@pytest.mark.parametrize("make_code, pytest_code, code", [(0, "0", 0), (3, "", 3), (2, "1", 1), (2, "5", 5)])
def test_ci_run_tests_a_clone_in_a_path_with_a_space(tmp_path, make_code, pytest_code, code):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "make").write_text(FAKE_MAKE)
    (bindir / "make").chmod(0o755)
    log = tmp_path / "make.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_MAKE_LOG=str(log),
               FAKE_MAKE_EXIT=str(make_code), FAKE_PYTEST_EXIT=pytest_code, TMPDIR=str(tmp))
    proc = subprocess.run([str(ROOT / ".ci" / "run")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == code, proc.stderr
    seen = json.loads(log.read_text())
    assert seen["argv"] == ["test"]  # exactly the README's test command
    assert " " in seen["cwd"] and not seen["cwd"].startswith(str(ROOT))
    assert seen["beside"] == [os.path.basename(seen["cwd"])]  # no sibling folder to read from
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert seen["head"] == head
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    top = {p.split("/")[0] for p in tracked if p}
    assert top <= set(seen["files"]) and ".venv" not in seen["files"] and "wheelhouse" not in seen["files"]
    assert list(tmp.iterdir()) == [], "the clone (or the exit status file) was not removed"


def test_make_test_lints_first_with_the_pinned_ruff():
    """CI runs `make test`: it must fail on a lint error before building anything, with the one ruff version the
    dev extra pins (a newer ruff brings new rules, so an unpinned one fails a fresh clone's `make check`)."""
    dry = subprocess.run(["make", "-n", "-B", "test", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    lint = [i for i, line in enumerate(lines) if "ruff check src tests" in line]
    pytest_runs = [i for i, line in enumerate(lines) if "/pytest " in line]
    builds = [i for i, line in enumerate(lines) if "ci-setup.sh" in line or "image build" in line]
    assert lint and pytest_runs and builds, dry.stdout
    assert lint[0] < min(builds) < pytest_runs[0]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"ruff==\d+\.\d+\.\d+"', pyproject), "pin ruff in the dev extra (ruff==X.Y.Z)"
