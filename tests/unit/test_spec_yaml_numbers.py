"""Job files: plain scalars that YAML 1.1 alone reads as base-60 or leading-zero octal numbers are the text the
user wrote (``nodes: 1:4`` is the elastic range 1..4, not 64), exactly as the quoted form."""

import pytest

from ddpctl import rules
from ddpctl.errors import SpecError
from ddpctl.render import render_files
from ddpctl.spec import load_spec


def _load(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_spec(p)


def _one(target, spec):
    [(_, text)] = render_files(target, spec).items()
    return text


@pytest.mark.parametrize("text, value", [
    ("1:30", "1:30"), ("12:00:00", "12:00:00"), ("-1:30", "-1:30"), ("1:30.5", "1:30.5"), ("190:20:30", "190:20:30"),
    ("0022", "0022"), ("-017", "-017"), ("00", "00"), ("0_7", "0_7"),
    # unchanged: not base 60 / octal in YAML 1.1, or written as a number on purpose
    ("0", 0), ("22", 22), ("0x1F", 31), ("1_000", 1000), ("1.5", 1.5), ("08", "08"), ("1:60", "1:60"),
    ("!!int 0022", 18), ("!!int 1:30", 90), ("'1:30'", "1:30"),
])
def test_base60_and_octal_scalars_are_text(text, value):
    root = rules.compose_yaml_bounded(f"v: {text}\n", "s.yaml")
    [(_, node)] = root.value
    got = rules.construct_scalar(node, "s.yaml")
    assert got == value and type(got) is type(value)


def test_elastic_nodes_unquoted_is_the_range(tmp_path):
    plain = _load(tmp_path, "nodes: 1:4\n", "plain.yaml")
    quoted = _load(tmp_path, 'nodes: "1:4"\n', "quoted.yaml")
    assert (plain.min_nodes, plain.nodes) == (1, 4) and plain.elastic
    assert plain == quoted
    sbatch = _one("slurm", plain)
    assert "#SBATCH --nodes=1-4\n" in sbatch and "--nodes=64" not in sbatch
    assert sbatch == _one("slurm", quoted)
    job = _one("pytorchjob", plain)
    assert "minReplicas: 1\n" in job and "maxReplicas: 4\n" in job and "replicas: 4\n" in job
    assert job == _one("pytorchjob", quoted)
    wide = _load(tmp_path, "nodes: 2:8\n", "wide.yaml")
    assert (wide.min_nodes, wide.nodes) == (2, 8)


@pytest.mark.parametrize("time", ["1:30", "12:00:00", "1-00:00:00"])
def test_slurm_time_reaches_sbatch_as_written(tmp_path, time):
    spec = _load(tmp_path, f"slurm: {{time: {time}}}\n")
    assert spec.slurm.time == time
    assert f"#SBATCH --time={time}\n" in _one("slurm", spec)


def test_env_values_keep_their_text(tmp_path):
    spec = _load(tmp_path, "env: {START: 12:30, UMASK: 0022, ZERO: 0, HOUR: 1:30.5}\n")
    assert spec.env_dict == {"START": "12:30", "UMASK": "0022", "ZERO": "0", "HOUR": "1:30.5"}
    sbatch = _one("slurm", spec)
    assert "export START=12:30\n" in sbatch and "export UMASK=0022\n" in sbatch
    listed = _load(tmp_path, "env: [UMASK=0022]\n", "listed.yaml")
    assert listed.env_dict == {"UMASK": "0022"}


def test_numeric_fields_read_the_text_as_the_quoted_form_does(tmp_path):
    assert _load(tmp_path, "gpus_per_node: 010\n").gpus_per_node == 10  # YAML 1.1 alone: 8
    assert _load(tmp_path, 'gpus_per_node: "010"\n', "q.yaml").gpus_per_node == 10


@pytest.mark.parametrize("text, needle", [
    ("gpus_per_node: 1:30\n", "'gpus_per_node' ({p}:1) the value must be an integer, got '1:30'"),
    ("port: 1:30.5\n", "'port' ({p}:1) the value must be an integer, got '1:30.5'"),
    ("cpus_per_node: 1:30\n", "'cpus_per_node' ({p}:1) must be a number, got a string '1:30'"),
    ("nodes: 1:2:3\n", "must be a node count or MIN:MAX, got '1:2:3'"),
])
def test_a_number_field_gives_its_type_error(tmp_path, text, needle):
    p = tmp_path / "job.yaml"
    with pytest.raises(SpecError) as exc:
        _load(tmp_path, text)
    assert needle.format(p=p) in str(exc.value) and "\n" not in str(exc.value)
