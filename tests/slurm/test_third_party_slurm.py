"""Your code, unchanged, on Slurm: every entry of the third-party compatibility matrix (tests/integration/
compatibility/, docs/compatibility.md; the entries in tests/support/end_of_training.py) through the rendered Slurm
script on the real one-machine Slurm cluster (tests/slurm):

``ddpctl render slurm -n 2 --container apptainer --workdir DIR --push REPO -- python SCRIPT`` (the project's
workspace image with its requirements layer, Lightning, Accelerate and transformers from the host's package index,
pushed to a real registry, the script pinned by digest) -> ``sbatch --wait`` -> both nodes' ``ddp-train-launch``
run the script from the image, the job completes (exit 0) and every rank prints its last line.

The Slurm nodes reach no package index either: the libraries come in the image, as on every container target.
STAND-IN, and only for the container runtime line: ``apptainer`` is the script of test_workspace_slurm.py (the
image through the Docker Engine, ``--network host --pid host``); everything else is real: the registry, Slurm,
srun, the rendered script, torchrun's c10d rendezvous, gloo, the libraries at the versions of requirements.txt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_workspace_slurm import APPTAINER_STANDIN, standins_left

import registry as reg
from end_of_training import ENTRIES, ENV, SCRIPTS, assert_printed
from itest_helpers import remove_project_images
from ports import free_port

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.docker]

DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
CPU_IMAGE = os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu")


@pytest.fixture(scope="module")
def matrix_registry(tmp_path_factory):
    problem = reg.missing()
    if problem:
        pytest.fail(problem)
    r = reg.Registry(tmp_path_factory.mktemp("registry")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def project(matrix_registry, tmp_path_factory):
    """The matrix's project and the registry repository its image goes to; the image (built on the first render,
    found by every later one) and its requirements layer are removed afterwards."""
    import docker

    proj = tmp_path_factory.mktemp("third-party-slurm") / "compat-project"
    shutil.copytree(SCRIPTS, proj, ignore=shutil.ignore_patterns("__pycache__"))
    # its own requirements layer (the layer's tag is a hash of the file's text): removing it at the end leaves
    # the layer of the Docker tier's copy of this project (tests/integration/test_third_party_scripts.py), which
    # may still be running, alone
    with (proj / "requirements.txt").open("a") as f:
        f.write("# the Slurm tier's copy of the project\n")
    repo = f"{matrix_registry.address}/matrix/compat-{uuid.uuid4().hex[:6]}"
    yield proj, repo
    remove_project_images(docker.from_env(), repo, proj)


@pytest.fixture(scope="module")
def apptainer_path(tmp_path_factory) -> str:
    bindir = tmp_path_factory.mktemp("standin-bin")
    (bindir / "apptainer").write_text(APPTAINER_STANDIN)
    (bindir / "apptainer").chmod(0o755)
    return f"{bindir}:{os.environ['PATH']}"


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_entry_through_the_rendered_slurm_script(slurm_cluster, project, apptainer_path, tmp_path, entry):
    proj, repo = project
    name = f"tp-{entry}"
    script = tmp_path / "job.sbatch"
    proc = subprocess.run([DDPCTL, "render", "slurm", "--name", name, "-n", "2", "--port", str(free_port()),
                           "--image", CPU_IMAGE, "--container", "apptainer", "--workdir", str(proj),
                           "--push", repo, *ENV.get(entry, []), "-o", str(script), "--", "python",
                           ENTRIES[entry][0]], capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = script.read_text()
    assert f"docker://{repo}@sha256:" in text and "ddp-train-launch" in text, text
    env = slurm_cluster.env(PATH=apptainer_path, OMP_NUM_THREADS="1")
    try:
        done = subprocess.run(["sbatch", "--parsable", "--wait", str(script)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=900)
        job = done.stdout.strip().split(";")[0]
        out = tmp_path / f"{name}-{job}.out"
        log = out.read_text() if out.exists() else f"(no {out.name}) {done.stderr}"
        assert done.returncode == 0, done.stderr + log[-3000:]
        assert_printed(log, entry)
        assert "terminate called" not in log, log[-3000:]
    finally:
        left = standins_left()
    assert not left, f"the stand-in left containers {left}"
