"""`--env` flags add to / override the file's env per key (mapping or KEY=VALUE list form)."""

from ddpctl.spec import load_spec


def test_flags_merge_into_mapping_env(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("env:\n  A: 1\n  B: file\n")
    spec = load_spec(p, {"env": ["B=flag", "C=x=y"]})
    assert spec.env_dict == {"A": "1", "B": "flag", "C": "x=y"}


def test_flags_merge_into_list_env(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("env: [A=1, B=file]\n")
    spec = load_spec(p, {"env": ["B=flag"]})
    assert spec.env == (("A", "1"), ("B", "flag"))


def test_flags_alone(tmp_path):
    assert load_spec(None, {"env": ["X=1"]}).env_dict == {"X": "1"}
