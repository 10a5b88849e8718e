"""The CUDA image made with no registry (``make image-cuda-local``: ``ddpctl image build --base local``, torch
2.13.0 + CUDA 13.0 + cuDNN 9 from wheels pip downloaded on this host, on the local Debian base), checked on a
machine without a GPU. Few tests, grouped here under the marker ``cuda_image`` (the image is ~2.5 GB on disk;
``make test`` builds it once per machine and reuses it by content).

Real: the image, torch and the CUDA/cuDNN/NCCL/cuBLAS libraries inside it (loaded with dlopen and asked their
versions: no GPU or driver is needed for that), ddp-train on CPU (gloo), the Docker Engine, a second dockerd with
Docker's own ``nvidia`` device driver (gpu_dockerd.py; stand-ins: the NVIDIA OCI hook and nvidia-smi, as there is
no GPU here), the registry and the renderers.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid

import pytest

from ddpctl.images.plans import LABEL_CUDA, LABEL_TORCH
from gpu_dockerd import NVIDIA_SMI, GpuDockerd, write_stub
from itest_helpers import ddpctl, missing_part

# grouped: one worker runs them (under pytest-xdist's --dist loadgroup) with the other second-dockerd tests, as
# only one second dockerd can run at a time (its bridge has a fixed name)
pytestmark = [pytest.mark.cuda_image, pytest.mark.xdist_group("gpu_dockerd")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE_BLOBS_MAX = 4e9  # bytes: the CUDA image's compressed layers in a registry (2.84 GB measured)
PRINT_GPUS = 'echo "GPUS node=$(hostname) rank=$RANK ids=$NVIDIA_VISIBLE_DEVICES"'


def test_cuda_image_check_shows_the_labelled_versions_and_loads_the_libraries(engine, cuda_image):
    proc = ddpctl("image", "check", cuda_image, "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    facts = json.loads(proc.stdout)
    labels = engine.images.get(cuda_image).labels
    assert labels[LABEL_TORCH] == "2.13.0" == facts["torch"].split("+")[0]
    assert labels[LABEL_CUDA] == "13.0" and facts["cuda"].startswith("13.0")
    assert re.fullmatch(r"9\.\d+\.\d+", facts["cudnn"]) and re.fullmatch(r"2\.\d+\.\d+", facts["nccl"]), facts
    libs = facts["libs"]
    assert set(libs) == {"cudart", "cublas", "cudnn", "nccl"}, libs
    assert not [k for k, v in libs.items() if "error" in v or not v.get("version")], libs
    assert libs["cudart"]["version"] == "13.0" and libs["cublas"]["version"].startswith("13.")
    assert libs["cudnn"]["version"] == facts["cudnn"] and libs["nccl"]["version"] == facts["nccl"]
    assert all("/dist-packages/nvidia/" in v["path"] for v in libs.values()), libs
    assert facts["gloo"] and facts["ddp_train"] == "/opt/ddpctl/bin/ddp-train"
    assert facts["driver_ok"] is None and "580.65.06" in facts["driver_reason"]  # no driver here: the minimum
    assert labels["org.opencontainers.image.base.name"] == "ddpctl/torch:2.13.0-cuda13.0-cudnn9-runtime"
    table = ddpctl("image", "check", cuda_image, timeout=300).stdout
    assert f"libcudnn.so.9 {facts['cudnn']}" in table and "(loaded, no GPU needed)" in table
    # the same inputs: recognised by content, nothing downloaded or rebuilt
    again = ddpctl("image", "build", "--base", "local", "--tag", cuda_image, cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "ddpctl/torch:2.13.0-cuda13.0-cudnn9-runtime is up to date" in again.stderr
    assert f"{cuda_image} is up to date" in again.stderr and "wheelhouse" not in again.stderr


def test_cuda_image_runs_the_ddp_train_toy_job_on_cpu(engine, cuda_image, job_name):
    proc = ddpctl("up", "--name", job_name, "--nodes", "2", "--image", cuda_image, "--rm", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    node0 = [line.split(" | ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("node-0 rank-0 | ")]
    summary = [json.loads(x) for x in node0 if x.startswith("{") and '"summary"' in x][-1]
    assert summary["world_size"] == 2 and summary["sync_check"] == "pass" and summary["backend"] == "gloo"


@pytest.fixture(scope="module")
def gpu_engine_cuda(engine, cuda_image):
    if os.geteuid() != 0:
        missing_part(
            "no GPU-request engine: not root (a second dockerd needs root)")
    # ~5 GB of image: more than its default 6 GB tmpfs holds with the layers unpacked; kept between runs (cache)
    d = GpuDockerd(tmpfs=False, cache="cuda")
    had_docker0 = os.path.exists("/sys/class/net/docker0")
    try:
        t0 = time.monotonic()
        d.start()
        # the shared engine's default bridge must survive a second daemon (a kept data root's network state once
        # made the daemon delete it: testcache.forget_networks)
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "the second dockerd removed docker0"
        how = d.load_image(cuda_image)
        print(f"second dockerd up and {cuda_image} {how} in {time.monotonic() - t0:.1f} s")
        yield d
    finally:
        d.stop()
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "the second dockerd removed docker0"


def test_cuda_image_two_nodes_one_gpu_each_on_the_gpu_engine(cuda_image, gpu_engine_cuda, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_stub(bin_dir / "nvidia-smi", NVIDIA_SMI.format(n=2))
    job = f"g{uuid.uuid4().hex[:8]}"
    env = {"DOCKER_HOST": gpu_engine_cuda.host, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    before = len(gpu_engine_cuda.hook_calls())
    try:
        proc = ddpctl("up", "--name", job, "--nodes", "2", "--gpus-per-node", "1", "--image", cuda_image, "--rm",
                      "--", "sh", "-c", PRINT_GPUS, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen = {m.group(1): m.group(2) for m in re.finditer(r"GPUS node=(\S+) rank=\d+ ids=(\S*)", proc.stdout)}
        assert seen == {f"{job}-node-0": "0", f"{job}-node-1": "1"}, proc.stdout
        assert [c for c in gpu_engine_cuda.hook_calls()[before:] if c == "ARGS prestart"]
    finally:
        ddpctl("down", job, env={"DOCKER_HOST": gpu_engine_cuda.host})


@pytest.fixture(scope="module")
def cuda_registry(engine, cuda_image, tmp_path_factory):
    """A real registry for the CUDA image's push, kept between runs (registry.kept): a run pushes only what
    changed, not 5 GB; without the kept one (another session holds it, DDPCTL_TEST_CACHE=off) the whole push."""
    import registry as reg

    reg.require(engine)
    with reg.kept("registry-cuda", 2 * IMAGE_BLOBS_MAX, tmp_path_factory.mktemp("cuda-registry")) as r:
        yield r


def test_cuda_image_manifests_pin_its_digest_after_a_push(engine, cuda_image, cuda_registry):
    registry = cuda_registry
    repo = f"{registry.address}/ddpctl/ddp-train"
    version = f"cuda-local-{uuid.uuid4().hex[:6]}"
    engine.images.get(cuda_image).tag(repo, version)
    try:
        t0 = time.monotonic()
        pushed = ddpctl("image", "push", f"{repo}:{version}", timeout=1200)
        assert pushed.returncode == 0, pushed.stderr[-2000:]
        stored = sum(f.stat().st_size for f in (registry.workdir / "data").rglob("*") if f.is_file())
        print(f"pushed {cuda_image} in {time.monotonic() - t0:.1f} s; the registry holds {stored / 1e9:.2f} GB")
        ref = pushed.stdout.strip()
        assert re.fullmatch(rf"{re.escape(repo)}@sha256:[0-9a-f]{{64}}", ref), ref
        common = ["--name", "cuda", "-n", "2", "-g", "1", "--image", ref]
        for target, extra, want in (("pytorchjob", [], ref), ("trainjob", [], ref), ("compose", [], ref),
                                    ("slurm", ["--container", "pyxis"], ref.replace("/", "#", 1)),
                                    ("slurm", ["--container", "apptainer"], f"docker://{ref}")):
            out = ddpctl("render", target, *common, *extra, timeout=120)
            assert out.returncode == 0, out.stderr[-2000:]
            assert want in out.stdout, (target, extra, out.stdout[-2000:])
    finally:
        engine.images.remove(f"{repo}:{version}")
