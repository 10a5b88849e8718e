"""The sbatch script is valid bash, and hostile values reach srun literally without executing.

The script is executed by real bash with ``srun``/``scontrol`` replaced by recorders (render_support.run_sbatch).
"""

import subprocess

import pytest

import render_support as rs
from ddpctl.errors import UnsupportedFeature
from ddpctl.render import slurm
from ddpctl.spec import spec_from_dict
from render_cases import SLURM

HOSTILE = "$(touch pwned1) `touch pwned2` 'q\" ; touch pwned3 \\\nsecond line $HOME ${X:-y}"


@pytest.mark.parametrize("case", sorted(SLURM))
def test_bash_parses_every_case(case, tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(slurm.render(spec_from_dict(SLURM[case])))
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_hostile_env_and_command_stay_literal(tmp_path):
    spec = spec_from_dict({"name": "evil", "nodes": 2, "env": {"EVIL": HOSTILE, "SPACES": "  a  b  "},
                           "command": ["python", "-c", HOSTILE.replace("\n", " "), "--flag=$(id)"]})
    got = rs.run_sbatch(slurm.render(spec), tmp_path, nodes=2)
    assert got["env"]["EVIL"] == HOSTILE
    assert got["env"]["SPACES"] == "  a  b  "
    assert got["argv"][-4:] == ["python", "-c", HOSTILE.replace("\n", " "), "--flag=$(id)"]
    assert not any(tmp_path.glob("pwned*")), "a hostile value was executed"


def test_container_words_are_quoted(tmp_path):
    spec = spec_from_dict({"name": "ctr", "nodes": 1, "gpus_per_node": 1,
                           "volumes": ["/data dir/$(touch pwned4):/data:ro"], "workdir": "/home/u/my proj",
                           "slurm": {"container": "apptainer", "container_image": "/img/$(touch pwned5).sif"}})
    got = rs.run_sbatch(slurm.render(spec), tmp_path, nodes=1)
    argv = got["argv"]
    i = argv.index("apptainer")
    assert argv[i:i + 10] == ["apptainer", "exec", "--nv", "--bind", "/data dir/$(touch pwned4):/data:ro",
                              "--bind", "/home/u/my proj:/workspace", "--pwd", "/workspace",
                              "/img/$(touch pwned5).sif"]
    assert not any(tmp_path.glob("pwned*"))


def test_pyxis_options_reach_srun(tmp_path):
    spec = spec_from_dict(SLURM["pyxis"])
    got = rs.run_sbatch(slurm.render(spec), tmp_path, nodes=2)
    assert "--container-image=nvcr.io#nvidia/pytorch:25.08-py3" in got["argv"]
    assert "--container-mounts=/data:/data:ro,/home/u/proj:/workspace" in got["argv"]
    assert "--container-workdir=/workspace" in got["argv"]


def test_master_addr_override(tmp_path):
    got = rs.run_sbatch(slurm.render(spec_from_dict(SLURM["master-addr-restarts"])), tmp_path, nodes=2)
    assert got["env"]["MASTER_ADDR"] == "head-node"
    assert "head-node:29600" in got["argv"]
    assert got["store"]["argv"][-1] == "29600"  # the store listens on the first node, at that port


@pytest.mark.parametrize("data", [
    {"slurm": {"partition": "gpu;touch x"}},
    {"slurm": {"account": "a b"}},
    {"slurm": {"output": "$(id).out"}},
    {"workdir": "/a b"},
])
def test_unsafe_directive_values_are_refused(data):
    with pytest.raises(UnsupportedFeature):
        slurm.render(spec_from_dict(data))


def test_sbatch_directives_precede_commands():
    text = slurm.render(spec_from_dict(SLURM["options"]))
    lines = text.splitlines()
    first_cmd = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first_cmd:])
