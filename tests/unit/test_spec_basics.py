"""Core spec rules that every other part relies on."""

import dataclasses

import pytest

from ddpctl.errors import SpecError
from ddpctl.spec import JobSpec, load_spec, spec_from_dict, spec_to_dict


def test_defaults_resolve():
    s = spec_from_dict({})
    assert s.resolved_image.endswith(":cpu")
    assert s.procs_per_node == 1 and s.world_size == 1 and s.resolved_backend == "gloo"
    g = spec_from_dict({"gpus_per_node": 8, "nodes": 2})
    assert g.procs_per_node == 8 and g.world_size == 16 and g.resolved_backend == "nccl"


def test_every_field_is_handled():
    # spec_from_dict's dispatch must cover every dataclass field: set each to its default and load.
    names = {f.name for f in dataclasses.fields(JobSpec)}
    data = spec_to_dict(spec_from_dict({"name": "x", "nodes": 2, "hosts": ["a", "b"], "network": "host",
                                        "env": {"A": 1}, "volumes": ["/d:/data:ro"], "shm_size": "1g"}))
    assert set(data) <= names
    assert spec_from_dict(data) == spec_from_dict(data)


def test_roundtrip():
    s = spec_from_dict({"name": "rt", "nodes": 3, "gpus_per_node": 2, "env": {"A": "b"},
                        "kubernetes": {"namespace": "ml", "tolerations": [{"key": "gpu", "operator": "Exists"}]},
                        "slurm": {"partition": "gpu"}, "nccl": {"debug": "info"}})
    assert spec_from_dict(spec_to_dict(s)) == s


@pytest.mark.parametrize("text, needle", [
    ("nodes: 0\n", "'nodes'"),
    ("nodes: two\n", "must be a node count or MIN:MAX"),
    ("bogus: 1\n", "'bogus'"),
    ("ipc: host\nshm_size: 2g\n", "cannot be combined"),
    ("port: 70000\n", "at most 65535"),
])
def test_file_errors_name_key_and_line(tmp_path, text, needle):
    p = tmp_path / "job.yaml"
    p.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert needle in str(exc.value)
    assert f"{p}:" in str(exc.value)
    assert "\n" not in str(exc.value)
