"""Your code, unchanged: training scripts written the way their ecosystems document them (tests/integration/
compatibility/: plain torch.distributed + DDP with and without destroy_process_group, a torchrun-style LOCAL_RANK
script, PyTorch Lightning, Hugging Face Accelerate, the transformers Trainer, a DataLoader with its own worker
processes), one project whose requirements.txt names the libraries, on 2 nodes of the CPU image:

- ``ddpctl up -n 2 --workdir DIR --bake -- python SCRIPT``: the requirements layer made from the host's package
  index with no flag (the containers reach none here), then every entry exits 0 and every rank prints its line;
- every entry through the rendered compose file (the baked image) under docker-compose 1.29.2;
- every entry through the pods of the rendered PyTorchJob, built by the operator EMULATION in tests/k8s_contract.py
  (no Kubernetes runs here, see test_k8s_operator_pods.py);
- a script that finishes training and exits 3 on one rank: ``up`` exits 3 naming that rank; one whose rank keeps a
  thread alive after its program ended: ``up`` ends in bounded time (DDP_TRAIN_EXIT_TIMEOUT) with one line.

The Slurm target of the same entries is tests/slurm/test_third_party_slurm.py (the entries themselves:
tests/support/end_of_training.py).
Real: the Docker Engine, docker-compose, torchrun, gloo, the libraries at the versions of requirements.txt. All
tests of this module run on one worker (one project, one baked image, built once).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest
import yaml

from end_of_training import ENTRIES, ENV, SCRIPT, SCRIPTS
from end_of_training import assert_printed as _printed
from itest_helpers import ddpctl, remove_project_images

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("third_party_scripts")]


@pytest.fixture(scope="module")
def project(engine, cpu_image, tmp_path_factory):
    proj = tmp_path_factory.mktemp("third-party") / "compat-project"
    shutil.copytree(SCRIPTS, proj, ignore=shutil.ignore_patterns("__pycache__"))
    (proj / "exits.py").write_text(SCRIPT)
    yield proj
    remove_project_images(engine, "ddpctl-workspace/compat-project", proj)


@pytest.fixture(scope="module")
def baked(project, cpu_image):
    """The first ``up --bake`` (plain DDP): builds the requirements layer from the host's index and the workspace
    image; its result is the plain-ddp entry's, its image is what compose and the PyTorchJob run."""
    name = f"tp{uuid.uuid4().hex[:6]}"
    try:
        up = ddpctl("up", "--name", name, "-n", "2", "--image", cpu_image, "--workdir", str(project), "--bake",
                    "--", "python", "plain_ddp.py", timeout=1500)
    finally:
        ddpctl("down", name)
    assert up.returncode == 0, up.stderr[-3000:]
    image = re.search(r", image (ddpctl-workspace/compat-project:ws-[0-9a-f]+)", up.stderr)
    assert image, up.stderr[-2000:]
    return image.group(1), up


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_up_bake_two_nodes(baked, project, cpu_image, job_name, entry):
    image, first = baked
    if entry == "plain-ddp":
        up = first
    else:
        up = ddpctl("up", "--name", job_name, "-n", "2", "--image", cpu_image, "--workdir", str(project), "--bake",
                    *ENV.get(entry, []), "--", "python", ENTRIES[entry][0], timeout=600)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
        assert f"image {image}" in up.stderr  # the same image: the tree and the requirements did not change
    _printed(up.stdout, entry)
    assert "terminate called" not in up.stdout + up.stderr


def test_up_a_rank_that_exits_3_after_training(baked, project, cpu_image, job_name):
    image, _ = baked
    up = ddpctl("up", "--name", job_name, "-n", "2", "--image", cpu_image, "--workdir", str(project), "--bake",
                "--", "python", "exits.py", "exit3", timeout=600)
    assert "node-1 rank-1 | trained rank 1" in up.stdout, up.stdout[-2000:]
    assert up.returncode == 3, up.stderr[-3000:]
    assert re.search(r"node 1 \(\S+-node-1\) of job \S+ failed: rank 1 exited with code 3\b", up.stderr), \
        up.stderr[-2000:]


def test_up_a_rank_that_does_not_exit_after_training(baked, project, cpu_image, job_name):
    t0 = time.monotonic()
    up = ddpctl("up", "--name", job_name, "-n", "2", "--image", cpu_image, "--workdir", str(project), "--bake",
                "-e", "DDP_TRAIN_EXIT_TIMEOUT=20", "--", "python", "exits.py", "hang", timeout=600)
    took = time.monotonic() - t0
    assert "node-1 rank-1 | trained rank 1" in up.stdout, up.stdout[-2000:]
    assert up.returncode == 124, up.stderr[-3000:]
    said = [line for line in up.stderr.splitlines() if line.startswith("error: ")]
    assert len(said) == 1, up.stderr[-3000:]
    assert re.search(r"node 1 \(\S+-node-1\) of job \S+ failed: rank 1 exited with code 124: its program ended but "
                     r"the process was still running 20 s later \(non-daemon threads still running at its end: "
                     r"never-ends\)", said[0]), said[0]
    assert took < 300, took


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_rendered_compose_file(baked, engine, tmp_path, entry):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    image, _ = baked
    name = f"tc{uuid.uuid4().hex[:6]}"
    path = tmp_path / "compose.yaml"
    ddpctl("render", "compose", "--name", name, "-n", "2", "--image", image, *ENV.get(entry, []), "-o", str(path),
           "--", "python", ENTRIES[entry][0], check=True)
    cmd = [compose, "-f", str(path), "-p", name, "--no-ansi"]
    try:
        run = subprocess.run([*cmd, "up", "--abort-on-container-exit", "--no-color"], capture_output=True,
                             text=True, timeout=600)
        codes = [engine.containers.get(f"{name}-node-{i}").attrs["State"]["ExitCode"] for i in (0, 1)]
    finally:
        subprocess.run([*cmd, "down", "-v"], capture_output=True, timeout=120)
    assert codes == [0, 0], run.stdout[-3000:] + run.stderr[-2000:]
    _printed(run.stdout, entry)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_emulated_pytorchjob(baked, engine, entry):
    from test_k8s_operator_pods import _run_pods

    from k8s_contract import pods_for

    image, _ = baked
    name = f"tk{uuid.uuid4().hex[:6]}"
    text = ddpctl("render", "pytorchjob", "--name", name, "-n", "2", "--image", image, *ENV.get(entry, []), "--",
                  "python", ENTRIES[entry][0], check=True).stdout
    pods = pods_for(yaml.safe_load(text))
    assert [p.argv[0] for p in pods] == ["ddp-train-launch"] * 2
    results = _run_pods(engine, name, pods)
    assert [code for code, _ in results.values()] == [0, 0], {k: v[1][-2000:] for k, v in results.items()}
    _printed("\n".join(logs for _, logs in results.values()), entry)
