"""GPU requests through the real Docker Engine, on a machine without GPUs.

Real: a second dockerd (gpu_dockerd.py: own data root, exec root, socket; the CPU image loaded into it),
its ``nvidia`` device driver and device-request handling (it picks the driver, sets NVIDIA_VISIBLE_DEVICES
to the requested ids and adds the prestart hook), the containers, torchrun inside them, docker-compose 1.29.2.
Stand-ins: ``nvidia-container-runtime-hook`` (records its call, exits 0: no libnvidia-container here) and
``nvidia-smi`` on ddpctl's PATH (a host with 4 GPUs, for the preflight). The containers run on CPU: the
command only prints the NVIDIA_VISIBLE_DEVICES the daemon gave it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from gpu_dockerd import NVIDIA_SMI, GpuDockerd, write_stub
from itest_helpers import ddpctl, missing_part

PRINT_GPUS = 'echo "GPUS node=$(hostname) rank=$RANK ids=$NVIDIA_VISIBLE_DEVICES"'
MANAGED = "app.kubernetes.io/managed-by=ddpctl"


# one second dockerd at a time (its default bridge ddgpu0 is a fixed name)
pytestmark = pytest.mark.xdist_group("gpu_dockerd")


@pytest.fixture(scope="module")
def gpu_engine(engine, cpu_image):
    problem = None
    if os.geteuid() != 0:
        problem = "not root (a second dockerd needs root)"
    elif not (shutil.which("dockerd") or os.path.exists("/usr/sbin/dockerd")):
        problem = "no dockerd binary"
    if problem:
        missing_part(f"no GPU-request engine: {problem}")
    had_docker0 = os.path.exists("/sys/class/net/docker0")
    d = GpuDockerd(cache="cpu")  # its data root and the CPU image in it kept between runs (testcache.py)
    try:
        t0 = time.monotonic()
        d.start()
        # the shared engine's default bridge must survive a second daemon (--bridge=none used to delete it)
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "the second dockerd removed docker0"
        how = d.load_image(cpu_image)
        print(f"second dockerd up and {cpu_image} {how} in {time.monotonic() - t0:.1f} s")
        yield d
    finally:
        t0 = time.monotonic()
        d.stop()
        print(f"second dockerd stopped and removed in {time.monotonic() - t0:.1f} s")
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "the second dockerd removed docker0"


@pytest.fixture
def smi_path(tmp_path):
    """PATH with a stand-in nvidia-smi that reports 4 GPUs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_stub(bin_dir / "nvidia-smi", NVIDIA_SMI.format(n=4))
    return f"{bin_dir}:{os.environ['PATH']}"


def _gpu_lines(stdout: str) -> dict[str, set[str]]:
    """container hostname -> the NVIDIA_VISIBLE_DEVICES values its processes printed."""
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"GPUS node=(\S+) rank=\d+ ids=(\S*)", stdout):
        out.setdefault(m.group(1), set()).add(m.group(2))
    return out


def _managed(d: GpuDockerd, job: str) -> tuple[str, str]:
    f = f"label=ddpctl.job={job}"
    return (d.docker("ps", "-aq", "--filter", f).stdout.strip(), d.docker("network", "ls", "-q", "--filter", f).stdout.strip())


@pytest.fixture
def gpu_job(gpu_engine):
    name = f"g{uuid.uuid4().hex[:8]}"
    yield name
    ddpctl("down", name, env={"DOCKER_HOST": gpu_engine.host})


def test_up_gives_each_node_its_own_gpus(gpu_engine, cpu_image, gpu_job, smi_path):
    before = len(gpu_engine.hook_calls())
    proc = ddpctl("up", "--name", gpu_job, "--nodes", "2", "--gpus-per-node", "2", "--image", cpu_image, "--rm",
                  "--", "sh", "-c", PRINT_GPUS, env={"DOCKER_HOST": gpu_engine.host, "PATH": smi_path}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _gpu_lines(proc.stdout) == {f"{gpu_job}-node-0": {"0,1"}, f"{gpu_job}-node-1": {"2,3"}}, proc.stdout
    # The daemon ran the (stand-in) NVIDIA hook as a prestart hook of each GPU container.
    assert [c for c in gpu_engine.hook_calls()[before:] if c == "ARGS prestart"]
    assert len(gpu_engine.hook_calls()) - before >= 2
    assert _managed(gpu_engine, gpu_job) == ("", "")


def test_up_device_ids_are_split_across_nodes(gpu_engine, cpu_image, gpu_job, smi_path):
    proc = ddpctl("up", "--name", gpu_job, "--nodes", "2", "--gpus-per-node", "2", "--device-ids", "3,1,2,0",
                  "--image", cpu_image, "--rm", "--", "sh", "-c", PRINT_GPUS,
                  env={"DOCKER_HOST": gpu_engine.host, "PATH": smi_path}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _gpu_lines(proc.stdout) == {f"{gpu_job}-node-0": {"3,1"}, f"{gpu_job}-node-1": {"2,0"}}, proc.stdout


def test_rendered_compose_file_with_docker_compose(gpu_engine, cpu_image, gpu_job, tmp_path):
    out = tmp_path / "compose.yaml"
    r = ddpctl("render", "compose", "--name", gpu_job, "-n", "2", "-g", "2", "--image", cpu_image, "-o", str(out),
               "--", "sh", "-c", PRINT_GPUS)
    assert r.returncode == 0, r.stderr
    env = gpu_engine.env()
    project = ["docker-compose", "-f", str(out), "-p", gpu_job]
    try:
        up = subprocess.run([*project, "up", "--no-color", "--abort-on-container-exit"], env=env,
                            capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        assert _gpu_lines(up.stdout) == {f"{gpu_job}-node-0": {"0,1"}, f"{gpu_job}-node-1": {"2,3"}}, up.stdout
    finally:
        subprocess.run([*project, "down", "-v"], env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (["--nodes", "3", "--gpus-per-node", "2"], "asks for GPU ids 0,1,2,3,4,5 but this host has 4 GPU(s)"),
    (["--nodes", "2", "--gpus-per-node", "2", "--device-ids", "0,1,2,7"], "asks for GPU ids 0,1,2,7 but this host has 4"),
])
def test_preflight_refuses_more_gpus_than_the_host_has(gpu_engine, cpu_image, gpu_job, smi_path, args, message):
    proc = ddpctl("up", "--name", gpu_job, *args, "--image", cpu_image, "--", "true",
                  env={"DOCKER_HOST": gpu_engine.host, "PATH": smi_path})
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _managed(gpu_engine, gpu_job) == ("", "")


def test_preflight_without_nvidia_smi_counts_no_gpus(gpu_engine, cpu_image, gpu_job, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in ("docker",):  # PATH without nvidia-smi
        os.symlink(shutil.which(tool), bare / tool)
    proc = ddpctl("up", "--name", gpu_job, "--nodes", "1", "--gpus-per-node", "1", "--image", cpu_image, "--",
                  "true", env={"DOCKER_HOST": gpu_engine.host, "PATH": f"{bare}:/usr/bin:/bin"})
    assert proc.returncode == 2 and "this host has 0 GPU(s)" in proc.stderr, proc.stderr


def test_engine_without_nvidia_driver_is_refused_before_anything_is_created(engine, cpu_image, smi_path):
    # The shared engine: no 'nvidia' runtime and no hook on its PATH, so it cannot select a GPU driver.
    job = f"g{uuid.uuid4().hex[:8]}"
    proc = ddpctl("up", "--name", job, "--gpus-per-node", "1", "--image", cpu_image, "--", "true",
                  env={"PATH": smi_path})
    assert proc.returncode == 1 and "no NVIDIA runtime" in proc.stderr, proc.stderr
    assert not engine.containers.list(all=True, filters={"label": f"ddpctl.job={job}"})


def test_doctor_gpu_checks_on_the_gpu_engine(gpu_engine, cpu_image, smi_path):
    path = f"{gpu_engine.bin}:{smi_path}"  # the hook stand-in is on this host's PATH, as on a toolkit host
    ok = ddpctl("doctor", "--target", "local", "--nodes", "2", "--gpus-per-node", "2", "--json",
                env={"DOCKER_HOST": gpu_engine.host, "PATH": path})
    import json

    report = json.loads(ok.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["docker"]["status"] == "ok" and gpu_engine.host in checks["docker"]["detail"]
    assert checks["nvidia runtime"]["status"] == "ok"
    assert checks["GPUs"]["status"] == "ok" and "4 GPU(s)" in checks["GPUs"]["detail"]
    assert checks["driver"]["status"] == "ok"
    assert ok.returncode == 0 and report["ok"], ok.stdout
    too_many = ddpctl("doctor", "--nodes", "3", "--gpus-per-node", "2", env={"DOCKER_HOST": gpu_engine.host,
                                                                               "PATH": path})
    assert too_many.returncode == 1
    assert re.search(r"^fail\s+GPUs: 6 GPU\(s\) asked for .* this host has 4", too_many.stdout, re.M), too_many.stdout


def _main_process_env(pid: int) -> dict[str, str]:
    raw = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def test_bench_docker_requests_the_cells_gpus(gpu_engine, cpu_image):
    """`bench --runtime docker` (its DockerRunner, as the CLI builds it) asks the daemon for each cell's GPUs: a
    2-GPU cell gets a device request for 2 and the daemon hands the container NVIDIA_VISIBLE_DEVICES=0,1; a cell
    that asks for all of the host's GPUs (None) gets the host's 4 (stand-in nvidia-smi count). The program is a
    4-second sleep (no GPU is touched); the daemon-set variable is read from the container's main process."""
    import docker

    from ddpctl.bench.docker import DockerRunner
    from ddpctl.bench.programs import Launch
    from ddpctl.dockerengine.docker_engine import DockerEngine

    client = docker.DockerClient(base_url=gpu_engine.host)
    runner = DockerRunner(image=cpu_image, engine=DockerEngine(client), host_gpus=4)
    prefix = f"bench-{os.getpid()}-"
    seen: dict[str, tuple] = {}

    def tick(_elapsed: float) -> None:
        for c in client.containers.list(filters={"label": MANAGED}):
            if c.name.startswith(prefix) and c.id not in seen and c.attrs["State"]["Pid"]:
                try:
                    env = _main_process_env(c.attrs["State"]["Pid"])
                except OSError:
                    continue  # exited between the listing and the read
                seen[c.id] = (c.attrs["HostConfig"]["DeviceRequests"], env.get("NVIDIA_VISIBLE_DEVICES"))

    sleep = ("-n", "1", "-r", "1", "import time; time.sleep(4)")
    before = len(gpu_engine.hook_calls())
    results = {}
    for gpus, nprocs in ((2, 2), (None, 4)):
        seen.clear()
        res = runner.run(Launch(f"gpus-{gpus}", "timeit", sleep, nprocs=nprocs, distributed=True, gpus=gpus),
                         timeout=240, tick=tick)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert len(seen) == 1, seen
        results[gpus] = next(iter(seen.values()))
    (req2,), ids2 = results[2]
    (req_all,), ids_all = results[None]
    assert (req2["Driver"], req2["Count"], ids2) == ("nvidia", 2, "0,1"), results
    assert (req_all["Driver"], req_all["Count"], ids_all) == ("nvidia", 4, "0,1,2,3"), results
    assert [c for c in gpu_engine.hook_calls()[before:] if c == "ARGS prestart"]  # the (stand-in) hook ran
    assert not [c.name for c in client.containers.list(all=True) if c.name.startswith(prefix)]  # removed after
