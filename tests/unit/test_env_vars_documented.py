"""Every DDPCTL_* variable the code, the tests or the build read is in docs/cli.md ("Environment variables"),
and none of them is a way to find input files (the repository finds all of its inputs itself; .ci/run proves it from a bare clone)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_VAR = re.compile(r"\bDDPCTL_[A-Z][A-Z0-9_]*\b")
_PATHLIKE = re.compile(r"_(DIR|PATH|FILE|ROOT|SCHEMAS?|DATA|HOME)$")


def _tracked() -> list[Path]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def _used() -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for path in _tracked():
        rel = path.relative_to(ROOT).as_posix()
        if rel.endswith(".md") or rel.startswith(("docs/", "tests/golden/")) or not path.is_file():
            continue
        if path.name == Path(__file__).name:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in set(_VAR.findall(text)):
            seen.setdefault(name, []).append(rel)
    return seen


def test_every_ddpctl_variable_is_documented():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Environment variables\n"):]
    used = _used()
    assert used, "found no DDPCTL_* variable at all"
    missing = {name: files for name, files in used.items() if f"`{name}" not in section}
    assert not missing, f"not documented in docs/cli.md, section 'Environment variables': {missing}"


def test_no_variable_points_at_input_files():
    pathlike = {name: files for name, files in _used().items() if _PATHLIKE.search(name)}
    assert not pathlike, f"inputs must be found in the repository, not through {pathlike}"
