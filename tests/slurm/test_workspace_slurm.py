"""Your code on Slurm: a third-party-style project -> ``ddpctl render slurm --container apptainer --workdir DIR
--push REPO`` (build, push to a real registry, script pinned by digest) -> the image removed from the Docker
Engine -> ``sbatch --wait`` on the real one-machine Slurm cluster (tests/slurm) -> both nodes' torchrun run the
project's train.py from the image and the job completes.

STAND-IN, and only for the container runtime line: Apptainer (and pyxis/enroot) are not packaged in Debian
bookworm, so an ``apptainer`` script first on the job's PATH runs ``apptainer exec [--bind S:D]... [--pwd DIR]
docker://IMAGE CMD...`` as ``docker run --network host --pid host`` of IMAGE (pulled from the registry by digest, as
apptainer pulls docker:// references) with the step's environment, the way apptainer passes it. Everything else
is real: the registry, Slurm, srun, the rendered script, torchrun's c10d rendezvous, gloo.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import registry as reg
from ports import free_port
from workspace_project import make_project

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.docker]

DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
CPU_IMAGE = os.environ.get("DDPCTL_TEST_IMAGE", "ddpctl/ddp-train:cpu")
STANDIN_LABEL = "ddpctl.purpose=apptainer-standin"

APPTAINER_STANDIN = r'''#!/bin/bash
# STAND-IN for `apptainer exec` (see tests/slurm/test_workspace_slurm.py): the image through the Docker Engine.
set -euo pipefail
[ "${1:-}" = exec ] || { echo "apptainer stand-in: only 'exec' is emulated" >&2; exit 2; }
shift
opts=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bind) opts+=(-v "$2"); shift 2 ;;
        --pwd) opts+=(-w "$2"); shift 2 ;;
        docker://*) image="${1#docker://}"; shift; break ;;
        *) echo "apptainer stand-in: option $1 is not emulated" >&2; exit 2 ;;
    esac
done
envs=()
for name in $(compgen -e); do
    case "$name" in PATH|HOME|HOSTNAME|PWD|OLDPWD|SHLVL|_|TMPDIR|VIRTUAL_ENV|LD_LIBRARY_PATH|PYTHONPATH) ;;
        *) envs+=(-e "$name") ;;
    esac
done
echo "apptainer stand-in: $(hostname) ${SLURMD_NODENAME:-?} step ${SLURM_STEP_ID:-?} pulling at $(date +%T)" >&2
# one pull at a time per machine, as apptainer's image cache does (concurrent pulls of one digest through
# dockerd 20.10 were seen to stall)
flock /tmp/ddpctl-apptainer-standin.lock docker pull -q "$image" >/dev/null
echo "apptainer stand-in: ${SLURMD_NODENAME:-?} step ${SLURM_STEP_ID:-?} starting at $(date +%T)" >&2
# --pid host: apptainer shares the host's PID namespace; in private ones the two "hosts" of this one machine would
# both run torchrun as the same pid and the c10d rendezvous would take them for one participant.
# The container is no child of this step (dockerd starts it), so when Slurm kills the step (srun SIGKILLs its
# tasks when it is itself signalled, as the script does to the rendezvous store's step at its end) the container
# would live on. A real apptainer step's processes die with it; to behave the same, the command inside the
# container watches this script's pid (one PID namespace: --pid host) and ends when it is gone.
exec docker run --rm --init --network host --ipc host --pid host --label "''' + STANDIN_LABEL + r'''" \
    --label "ddpctl.slurm-job=${SLURM_JOB_ID:-}" "${envs[@]}" "${opts[@]}" --entrypoint sh "$image" -c '
        watch="$1"; shift; "$@" & c=$!
        while kill -0 "$c" 2>/dev/null; do
            if ! kill -0 "$watch" 2>/dev/null; then kill -TERM "$c"; sleep 5; kill -KILL "$c" 2>/dev/null; break; fi
            sleep 1
        done
        wait "$c"' standin "$$" "$@"
'''


def _standin_containers() -> list[str]:
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={STANDIN_LABEL}"], capture_output=True,
                          text=True).stdout.split()


def standins_left() -> list[str]:
    """The stand-in's containers still there 30 s after a job (``--rm``: they go when their step ends), removed;
    a test fails on them afterwards."""
    deadline = time.monotonic() + 30
    while _standin_containers() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _standin_containers()
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
    return left


@pytest.fixture
def image_registry(tmp_path):
    problem = reg.missing()
    if problem:
        pytest.fail(problem)
    r = reg.Registry(tmp_path / "registry").start()
    yield r
    r.stop()


def test_workspace_image_runs_through_the_rendered_apptainer_line(slurm_cluster, image_registry, tmp_path):
    import docker

    engine = docker.from_env()
    proj, house = make_project(tmp_path)
    repo = f"{image_registry.address}/e2e/slurm-{uuid.uuid4().hex[:6]}"
    script = tmp_path / "job.sbatch"
    # the two slurmd share this machine's network: the rendezvous port must be free on it
    proc = subprocess.run([DDPCTL, "render", "slurm", "--name", "wsjob", "-n", "2", "--port", str(free_port()),
                           "--image", CPU_IMAGE, "--container", "apptainer", "--workdir", str(proj),
                           "--wheelhouse", str(house), "--push", repo, "-o", str(script), "--", "python",
                           "train.py"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = script.read_text()
    pinned = re.search(r"docker://(\S+)", text).group(1)
    assert pinned.startswith(f"{repo}@sha256:") and f"pushed {pinned}" in proc.stderr and "--pwd /workspace" in text
    assert str(proj) not in text  # nothing of this machine's directory in the script
    built = [t for img in engine.images.list(name=repo) for t in img.tags]
    deps = engine.images.get(built[0]).labels["ai.ddpctl.workspace.deps-hash"]
    engine.images.remove(built[0])
    engine.images.remove(f"ddpctl/workspace-deps:{deps}")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "apptainer").write_text(APPTAINER_STANDIN)
    (bindir / "apptainer").chmod(0o755)
    env = slurm_cluster.env(PATH=f"{bindir}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    try:
        done = subprocess.run(["sbatch", "--parsable", "--wait", str(script)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=900)
        job = done.stdout.strip().split(";")[0]
        log = (tmp_path / f"wsjob-{job}.out").read_text()
        assert done.returncode == 0, done.stderr + log[-3000:]
        for rank in (0, 1):
            assert f"workspace-train rank {rank}/2 node {rank} sum 3 probe 4242 cwd /workspace" in log, log[-3000:]
    finally:
        left = standins_left()
        try:
            engine.images.remove(pinned, force=True)
        except Exception:  # noqa: BLE001 - not pulled
            pass
    assert not left, f"the stand-in left containers {left}"


