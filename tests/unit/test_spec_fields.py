"""The spec's field table is complete and is the one place a field's check and flag are declared."""

import dataclasses

import pytest

from ddpctl.spec import JobSpec
from ddpctl.spec.fields import FIELDS, SUB_KEYS, TOP_KEYS, flags
from ddpctl.spec.model import INTERNAL_FIELDS, SECTIONS


def test_every_model_field_has_exactly_one_table_entry():
    model = {f.name for f in dataclasses.fields(JobSpec)} - INTERNAL_FIELDS
    assert set(TOP_KEYS) == model
    for name, cls in SECTIONS.items():
        assert set(SUB_KEYS[name]) == {f.name for f in dataclasses.fields(cls)}, name
    assert set(FIELDS) == model | {f"{s}.{k}" for s, keys in SUB_KEYS.items() for k in keys}


@pytest.mark.parametrize("command", ["up", "compose", "pytorchjob", "trainjob", "slurm"])
def test_flags_of_a_command_are_distinct(command):
    fields = flags(command)
    params = [f.param for f in fields]
    decls = [d for f in fields for d in f.flag.decls]
    assert len(params) == len(set(params)) and len(decls) == len(set(decls))


def test_flags_reach_their_fields():
    """A spec flag and a target option, both built from the table alone, land in the rendered manifest."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "ddpctl", "render", "pytorchjob", "--namespace", "team-a",
                             "--gang", "-n", "2", "--max-restarts", "3", "-e", "A=1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "namespace: team-a" in result.stdout and "- --max-restarts\n            - '3'\n" in result.stdout
    assert "minAvailable: 2" in result.stdout
    up_flags = {d for f in flags("up") for d in f.flag.decls}
    assert "--docker-hosts" in up_flags and "--hosts" in up_flags  # up: one host, or node i on Docker host i
    assert "--docker-hosts" not in {d for f in flags("compose") for d in f.flag.decls}
