"""Golden files for every target and option: tests/golden/<target>/<case>.<ext>.

Regenerate after an intended change with ``DDPCTL_UPDATE_GOLDEN=1 pytest tests/unit/test_render_golden.py``
and review the diff.
"""

import os
from pathlib import Path

import pytest

from ddpctl.render import render_files
from ddpctl.spec import spec_from_dict
from render_cases import ALL

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("DDPCTL_UPDATE_GOLDEN") == "1"
CASES = [(t, c) for t, cases in ALL.items() for c in cases]


def rendered(target: str, case: str) -> str:
    files = render_files(target, spec_from_dict(ALL[target][case]))
    return "---\n".join(f"# file: {name}\n{text}" for name, text in files.items())


@pytest.mark.parametrize("target, case", CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_golden(target, case):
    path = GOLDEN / target / (case + (".sbatch" if target == "slurm" else ".yaml"))
    text = rendered(target, case)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with DDPCTL_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs: review, then DDPCTL_UPDATE_GOLDEN=1"


def test_no_stale_golden_files():
    expected = {GOLDEN / t / (c + (".sbatch" if t == "slurm" else ".yaml")) for t, c in CASES}
    present = {p for p in GOLDEN.rglob("*") if p.is_file()}
    assert present <= expected, f"stale golden files: {sorted(map(str, present - expected))}"


def test_rendering_is_pure_and_repeatable():
    for target, case in CASES[:: max(1, len(CASES) // 8)]:
        spec = spec_from_dict(ALL[target][case])
        before = repr(spec)
        assert render_files(target, spec) == render_files(target, spec)
        assert repr(spec) == before
