"""The checked-in compose/, k8s/ and slurm/ files are exactly what the renderers make of examples/."""

from pathlib import Path

from ddpctl import examples

REPO = Path(__file__).resolve().parents[2]


def test_checked_in_examples_match_renderers():
    problems = examples.drift(REPO)
    assert problems == [], f"{problems}: run `make render` (python -m ddpctl.examples) and commit"


def test_drift_is_detected(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "cpu-only.yaml").write_text((REPO / "examples" / "cpu-only.yaml").read_text())
    for name in examples.EXAMPLES:
        if name != "cpu-only":
            (tmp_path / "examples" / f"{name}.yaml").write_text((REPO / "examples" / f"{name}.yaml").read_text())
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert examples.main([]) == 0
        assert examples.drift(tmp_path) == []
        (tmp_path / "compose" / "cpu-only.yaml").write_text("edited\n")
        (tmp_path / "k8s" / "old.yaml").write_text("stale\n")
        assert sorted(examples.drift(tmp_path)) == ["compose/cpu-only.yaml differs", "k8s/old.yaml is stale"]
        assert examples.main(["--check"]) == 1
    finally:
        os.chdir(cwd)
