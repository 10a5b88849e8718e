"""``ddpctl doctor`` checks as pure functions: each check is fed recorded probe answers (the probes are the
only side effects; tests/integration/test_doctor_real.py and tests/slurm run the real ones)."""

from __future__ import annotations

import pytest

from ddpctl import doctor as dr

GiB = 1024**3


def probes(**over) -> dr.Probes:
    tools = over.pop("tools", {"docker", "nvidia-smi"})
    runs = over.pop("runs", {})

    def run(argv):
        key = " ".join(argv)
        for prefix, answer in runs.items():
            if key.startswith(prefix):
                return answer
        return 127, "", f"{argv[0]}: not found"

    def docker():
        if over.get("docker_down"):
            raise dr.ProbeError("connection refused")
        return {"version": {"Version": "27.1.0", "ApiVersion": "1.46"},
                "info": {"Runtimes": over.get("runtimes", {"runc": {}})}}

    base = dict(which=lambda n: f"/usr/bin/{n}" if n in tools else None, run=run, docker=docker,
                image_labels=lambda ref: over.get("labels"), shm_bytes=lambda: over.get("shm", 16 * GiB),
                rlimit=lambda n: over.get(n, (-1, -1)), port_free=lambda port: over.get("port_free", True),
                listdir=lambda path: over.get("dirs", {}).get(path), read=lambda path: "up\n",
                env=over.get("env", {}))
    return dr.Probes(**base)


def by_name(results):
    return {c.name: c for c in results}


def test_plan_per_target():
    assert dr.plan(dr.Options("local")) == ["docker", "shm", "memlock", "stack", "port", "ib", "socket-ifname"]
    assert dr.plan(dr.Options("compose", gpus_per_node=1))[:4] == ["docker", "nvidia-runtime", "gpus", "driver"]
    assert dr.plan(dr.Options("k8s")) == ["kubectl", "context", "crds", "ib", "socket-ifname"]
    assert dr.plan(dr.Options("slurm", container="pyxis"))[:3] == ["slurm-commands", "partitions",
                                                                    "container-runtime"]


def test_docker_down_fails_with_the_fix():
    r = by_name(dr.run(dr.Options("local"), probes(docker_down=True, env={"DOCKER_HOST": "unix:///x.sock"})))
    assert r["docker"].status == "fail" and "unix:///x.sock" in r["docker"].detail
    assert "start dockerd" in r["docker"].line()


def test_gpu_checks_ok_with_runtime_gpus_and_driver():
    p = probes(runtimes={"nvidia": {}, "runc": {}}, labels={"ai.ddpctl.cuda.version": "12.8"},
               runs={"nvidia-smi -L": (0, "GPU 0: H100\nGPU 1: H100\nGPU 2: H100\nGPU 3: H100\n", ""),
                     "nvidia-smi --query-gpu": (0, "570.86.15\n", "")})
    r = by_name(dr.run(dr.Options("local", nodes=2, gpus_per_node=2), p))
    assert [r[k].status for k in ("nvidia runtime", "GPUs", "driver")] == ["ok", "ok", "ok"]
    assert "525.60.13" in r["driver"].detail


def test_too_few_gpus_no_runtime_old_driver_fail():
    p = probes(labels={"ai.ddpctl.cuda.version": "13.0"},
               runs={"nvidia-smi -L": (0, "GPU 0: A100\nGPU 1: A100\n", ""),
                     "nvidia-smi --query-gpu": (0, "550.54.15\n", "")})
    r = by_name(dr.run(dr.Options("local", nodes=2, gpus_per_node=2), p))
    assert r["GPUs"].status == "fail" and "this host has 2" in r["GPUs"].detail
    assert r["nvidia runtime"].status == "fail" and "nvidia-ctk" in r["nvidia runtime"].fix
    assert r["driver"].status == "fail" and "580.65.06" in r["driver"].detail


def test_cdi_spec_or_hook_counts_as_nvidia_support():
    cdi = probes(dirs={"/etc/cdi": ["nvidia.yaml"]})
    assert by_name(dr.run(dr.Options("local", gpus_per_node=1), cdi))["nvidia runtime"].status == "ok"
    hook = probes(tools={"docker", dr.HOOK})
    assert by_name(dr.run(dr.Options("local", gpus_per_node=1), hook))["nvidia runtime"].status == "ok"


def test_shm_too_small_warns_with_the_arithmetic():
    r = by_name(dr.run(dr.Options("local", gpus_per_node=0, nproc_per_node=4, workers=4), probes(shm=64 * 1024**2)))
    assert r["/dev/shm"].status == "warn" and "4.0 GiB" in r["/dev/shm"].detail
    ok = by_name(dr.run(dr.Options("local", workers=0), probes(shm=64 * 1024**2)))
    assert ok["/dev/shm"].status == "ok"


def test_ulimits():
    r = by_name(dr.run(dr.Options("slurm", gpus_per_node=8), probes(memlock=(65536, 65536), stack=(8 << 20, -1))))
    assert r["memlock ulimit"].status == "warn" and r["stack ulimit"].status == "warn"
    assert "limits.conf" in r["memlock ulimit"].fix


def test_busy_port_fails_only_where_it_is_the_host_port():
    busy = probes(port_free=False)
    assert by_name(dr.run(dr.Options("local"), busy))["master port"].status == "warn"
    assert by_name(dr.run(dr.Options("local", network="host"), busy))["master port"].status == "fail"


@pytest.mark.parametrize("value, status", [("eth", "ok"), ("=eth0", "ok"), ("ib", "fail"), ("^docker,lo", "ok")])
def test_nccl_socket_ifname(value, status):
    p = probes(dirs={"/sys/class/net": ["lo", "eth0", "docker0"]}, env={"NCCL_SOCKET_IFNAME": value})
    assert by_name(dr.run(dr.Options("local"), p))["NCCL_SOCKET_IFNAME"].status == status


def test_interface_candidates_and_ib_devices():
    p = probes(dirs={"/sys/class/net": ["lo", "eth0", "ens5", "docker0", "veth12"],
                     "/sys/class/infiniband": ["mlx5_0"]})
    r = by_name(dr.run(dr.Options("local"), p))
    assert "ens5, eth0" in r["NCCL_SOCKET_IFNAME"].detail
    assert r["InfiniBand"].status == "ok" and "mlx5_0" in r["InfiniBand"].detail


def test_k8s_crds():
    crds = "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org\n"
    p = probes(tools={"kubectl"}, runs={"kubectl config current-context": (0, "kind-ml\n", ""),
                                        "kubectl get crd": (0, crds, "")})
    r = by_name(dr.run(dr.Options("k8s"), p))
    assert r["PyTorchJob CRD"].status == "ok" and r["TrainJob CRD"].status == "warn"
    none = probes(tools={"kubectl"}, runs={"kubectl config current-context": (0, "kind-ml\n", ""),
                                           "kubectl get crd": (0, "", "")})
    assert {c.status for c in dr.run(dr.Options("k8s"), none) if "CRD" in c.name} == {"fail"}


def test_slurm_partition_and_pyxis():
    part = "PartitionName=gpu AllowGroups=ALL State=UP\nPartitionName=debug State=DOWN\n"
    p = probes(tools={"sbatch", "srun", "scontrol"}, runs={"scontrol -o show partition": (0, part, ""),
                                                            "srun --help": (0, "--container-image=...", "")})
    r = by_name(dr.run(dr.Options("slurm", partition="gpu", container="pyxis"), p))
    assert r["partitions"].status == "ok" and r["pyxis"].status == "ok"
    assert by_name(dr.run(dr.Options("slurm", partition="debug"), p))["partitions"].status == "warn"
    assert by_name(dr.run(dr.Options("slurm", partition="a100"), p))["partitions"].status == "fail"
    r = by_name(dr.run(dr.Options("slurm", container="apptainer"), p))
    assert r["apptainer"].status == "fail"


def test_checkpoint_space_is_checked_when_the_checkpoint_size_is_known():
    """A job volume (in the engine's data root) or a mounted directory too small for the kept checkpoints plus the
    one being written fails before the run; the size comes from the flag or from a checkpoint already there."""
    MiB = 1024**2

    def with_space(free, **over):
        p = probes(**over)
        d = p.docker
        p.docker = lambda: {**d(), "info": {"DockerRootDir": "/var/lib/docker"}}
        p.free_bytes = lambda path: free.get(path)
        return p

    assert "checkpoint-space" not in dr.plan(dr.Options("local"))  # nothing asked, nothing checked
    small = by_name(dr.run(dr.Options("local", checkpoint_size=100 * MiB), with_space({"/var/lib/docker": 300 * MiB})))
    c = small["checkpoint space"]
    assert c.status == "fail" and "300.0 MiB free in /var/lib/docker" in c.detail
    assert "4 checkpoint(s) of 100.0 MiB (from --checkpoint-size; the 3 kept plus the one being written) need 400.0 MiB" \
        in c.detail and "keep fewer checkpoints" in c.fix
    roomy = dr.Options("local", checkpoint_size=100 * MiB, keep_checkpoints=1)
    assert by_name(dr.run(roomy, with_space({"/var/lib/docker": 300 * MiB})))["checkpoint space"].status == "ok"
    # the size read from a checkpoint already in the mounted directory (a resumed job)
    p = with_space({"/ckpt": 50 * MiB}, dirs={"/ckpt": ["ckpt-00000010.pt", "ckpt-00000010.pt.json", "x"]})
    p.read = lambda path: '{"bytes": 20971520}' if path == "/ckpt/ckpt-00000010.pt.json" else None
    got = by_name(dr.run(dr.Options("local", checkpoint_dir="/ckpt"), p))["checkpoint space"]
    assert got.status == "fail" and "from the checkpoints in /ckpt" in got.detail and "need 80.0 MiB" in got.detail
    unknown = by_name(dr.run(dr.Options("local", checkpoint_dir="/ckpt"), with_space({"/ckpt": 50 * MiB})))
    assert unknown["checkpoint space"].status == "ok" and "checkpoint size unknown" in unknown["checkpoint space"].detail
