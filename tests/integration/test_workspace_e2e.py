"""End to end: a third-party-style project (its own train.py on torchrun's env contract, a requirements.txt
naming one pure-Python package from a wheelhouse made here) -> ``ddpctl render ... --workdir DIR --push REPO``
(build, push to a real registry, render pinned by digest) -> the image removed from the Docker Engine -> the
job runs to completion on 2 nodes from the registry:

- PyTorchJob and TrainJob: the pods the operators would create, built by the operator EMULATION in
  tests/support/k8s_contract.py (no Kubernetes API server, operator or kubelet runs here: see
  test_k8s_operator_pods.py); each pod's image is pulled by digest first, as a kubelet does;
- compose: the rendered file run by docker-compose 1.29.2, which pulls the image itself.

Real: the Docker Engine, the registry (Debian's docker-registry), docker-compose, torchrun, gloo. The Slurm
path is tests/slurm/test_workspace_slurm.py.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest
import yaml
from test_k8s_operator_pods import _run_pods

from itest_helpers import CPU_IMAGE, ddpctl, labelled
from workspace_project import make_project


def _pinned(doc_text: str) -> set[str]:
    found = set()
    for doc in yaml.safe_load_all(doc_text):
        stack = [doc]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                stack.extend(x.values())
                if isinstance(x.get("image"), str):
                    found.add(x["image"])
            elif isinstance(x, list):
                stack.extend(x)
    return found


def _absent(engine, ref: str) -> bool:
    try:
        engine.images.get(ref)
        return False
    except Exception:  # noqa: BLE001 - ImageNotFound
        return True


@pytest.fixture(scope="module")
def registry(tmp_path_factory, engine):
    """This file's registry, kept between runs (registry.kept): the CPU image's layers under the workspace image
    are pushed once per machine, later runs mount them into the new repository; a fresh one when another
    session holds it."""
    import registry as reg

    reg.require(engine)
    with reg.kept("registry-e2e", 4e9, tmp_path_factory.mktemp("e2e-registry")) as r:
        yield r


@pytest.fixture(scope="module")
def rendered(engine, cpu_image, registry, tmp_path_factory):
    """Every target rendered with --push (one build, one push: the later renders find the tree unchanged),
    then the image removed from the engine: whatever runs next pulls it from the registry by digest."""
    tmp = tmp_path_factory.mktemp("e2e")
    proj, house = make_project(tmp)
    repo = f"{registry.address}/e2e/my-project-{uuid.uuid4().hex[:6]}"
    name = f"w{uuid.uuid4().hex[:7]}"
    out: dict[str, str] = {}
    for target in ("pytorchjob", "trainjob", "compose"):
        proc = ddpctl("render", target, "--name", name, "-n", "2", "--image", CPU_IMAGE, "--workdir", str(proj),
                      "--wheelhouse", str(house), "--push", repo, "--", "python", "train.py", timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[target] = proc.stdout
    pinned = set().union(*(_pinned(t) for t in out.values()))
    assert len(pinned) == 1, pinned  # every target names the same image, by digest
    ref = pinned.pop()
    assert ref.startswith(f"{repo}@sha256:")
    # remove the workspace image (and its requirements layer) from the engine
    built = [t for img in engine.images.list(name=repo) for t in img.tags]
    assert len(built) == 1 and registry.tags(repo.split("/", 1)[1]) == [built[0].rsplit(":", 1)[1]]
    deps = engine.images.get(built[0]).labels["ai.ddpctl.workspace.deps-hash"]
    engine.images.remove(built[0])
    engine.images.remove(f"ddpctl/workspace-deps:{deps}")
    assert _absent(engine, ref)
    yield name, ref, out
    try:
        engine.images.remove(ref, force=True)
    except Exception:  # noqa: BLE001 - a test already removed it
        pass


@pytest.mark.parametrize("kind", ["pytorchjob", "trainjob"])
def test_operator_pods_pull_the_workspace_image_by_digest_and_complete(engine, rendered, kind):
    from k8s_contract import pods_for

    name, ref, out = rendered
    doc = yaml.safe_load(out[kind])
    pods = pods_for(doc)
    assert len(pods) == 2 and {p.image for p in pods} == {ref}
    if kind == "pytorchjob":
        assert all(c["workingDir"] == "/workspace" for r in doc["spec"]["pytorchReplicaSpecs"].values()
                   for c in r["template"]["spec"]["containers"])
    if _absent(engine, ref):
        engine.images.pull(ref)  # the kubelet's pull (imagePullPolicy IfNotPresent), by digest
    results = _run_pods(engine, f"{name}-{kind[:3]}", pods)
    for pod, (code, logs) in results.items():
        assert code == 0, f"{pod}: {logs[-2000:]}"
    logs = "\n".join(log for _, log in results.values())
    for rank in (0, 1):
        assert f"workspace-train rank {rank}/2 node {rank} sum 3 probe 4242 cwd /workspace" in logs, logs[-2000:]
    assert labelled(engine, f"{name}-{kind[:3]}") == ([], [])


def test_compose_file_pulls_the_workspace_image_and_completes(engine, rendered, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    name, ref, out = rendered
    try:
        engine.images.remove(ref)  # whatever an earlier test pulled: compose must pull it
    except Exception:  # noqa: BLE001 - not there
        pass
    services = yaml.safe_load(out["compose"])["services"]
    assert all(s["image"] == ref and s["working_dir"] == "/workspace" and "volumes" not in s
               for s in services.values())
    path = tmp_path / "compose.yaml"
    path.write_text(out["compose"])
    base = [compose, "-f", str(path), "-p", name, "--no-ansi"]
    try:
        proc = subprocess.run([*base, "up", "--abort-on-container-exit", "--no-color"], capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        for rank in (0, 1):
            assert f"workspace-train rank {rank}/2 node {rank} sum 3 probe 4242 cwd /workspace" in proc.stdout
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], capture_output=True, timeout=120)
    assert labelled(engine, name) == ([], [])


def test_up_bake_runs_the_workspace_image_with_nothing_mounted(engine, cpu_image, tmp_path, job_name):
    """`ddpctl up --workdir DIR --bake`: the image a cluster would get, run locally (no push, no bind mount)."""
    proj, house = make_project(tmp_path)
    proc = ddpctl("up", "--name", job_name, "-n", "2", "--rm", "--workdir", str(proj), "--bake", "--wheelhouse",
                  str(house), "--", "python", "train.py", timeout=900)
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        for rank in (0, 1):
            assert f"rank-{rank} | workspace-train rank {rank}/2 node {rank} sum 3 probe 4242 cwd /workspace" \
                in proc.stdout, proc.stdout[-2000:]
        image = next(line.split("image ")[1].split()[0] for line in proc.stderr.splitlines()
                     if line.startswith(f"job {job_name}: 2 node(s)"))
        assert image.startswith("ddpctl-workspace/my-project:ws-")
        dry = ddpctl("up", "--name", job_name, "-n", "2", "--workdir", str(proj), "--bake", "--dry-run", "--",
                     "python", "train.py", check=True)
        assert "working_dir: /workspace" not in dry.stdout and str(proj) not in dry.stdout  # nothing mounted
    finally:
        for img in engine.images.list(name="ddpctl-workspace/my-project"):
            deps = img.labels.get("ai.ddpctl.workspace.deps-hash")
            if str(proj) == img.labels.get("ai.ddpctl.workspace.source"):
                engine.images.remove(img.id, force=True)
                try:
                    engine.images.remove(f"ddpctl/workspace-deps:{deps}")
                except Exception:  # noqa: BLE001 - shared or gone
                    pass
