"""Test files have one basename each across tests/: pytest imports them by basename (conftest.py aside, which pytest handles per folder; tests/ folders are not
packages), so two files of one name in different tiers collect alone but stop the whole suite's collection
("import file mismatch") when `make test` collects every tier at once; the quick tier never sees the clash."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def same_basenames(root: Path) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in root.rglob("*.py"):
        if ".venv" not in path.parts and "__pycache__" not in path.parts:
            seen[path.name].append(str(path.relative_to(root)))
    return {name: sorted(paths) for name, paths in seen.items() if len(paths) > 1 and name not in ("__init__.py", "conftest.py")}


def test_every_python_file_under_tests_has_its_own_basename():
    assert len(list(TESTS.rglob("test_*.py"))) > 100  # the walk sees the suite
    assert same_basenames(TESTS) == {}


def test_the_check_sees_a_clash(tmp_path):
    for tier in ("unit", "distributed"):
        (tmp_path / tier).mkdir()
        (tmp_path / tier / "test_same.py").write_text("")
    assert same_basenames(tmp_path) == {"test_same.py": ["distributed/test_same.py", "unit/test_same.py"]}
