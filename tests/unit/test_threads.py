"""CPU threads per training process: the rule in ddpctl.launch, per target, and its run-time half in ddp_train.

Rule: OMP_NUM_THREADS = max(1, CPUs available to the node's container / processes on that node), where the
nodes sharing one host share its CPUs; a user's own OMP_NUM_THREADS (spec env / -e) always wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddp_train.runtime import threads as rt
from ddpctl import launch
from ddpctl.local.plan import plan_local
from ddpctl.render import compose, pytorchjob, slurm, trainjob
from ddpctl.spec import spec_from_dict

ROOT = Path(__file__).resolve().parents[2]


def spec(**kw):
    return spec_from_dict(kw)


@pytest.mark.parametrize("cpus, procs, want", [(2, 1, 2), (2, 2, 1), (1, 4, 1), (16, 3, 5), (1.5, 1, 1),
                                               (0.5, 1, 1), (8.0, 2, 4)])
def test_the_rule(cpus, procs, want):
    assert launch.omp_threads(cpus, procs) == want


# ------------------------------------------------------------------------------- ddpctl up (Docker)

@pytest.mark.parametrize("kw, host, want", [
    ({"nodes": 2}, 2, "1"),  # the quickstart on a 2-core machine: 1 thread each, not 2 x 2
    ({"nodes": 2}, 16, "8"),
    ({"nodes": 2, "nproc_per_node": 2}, 16, "4"),
    ({"nodes": 1, "nproc_per_node": 3}, 16, "5"),
    ({"nodes": 4}, 2, "1"),  # more nodes than CPUs: never 0
    ({"nodes": 2, "cpus_per_node": 2}, 16, "2"),  # the container's limit
    ({"nodes": 2, "cpus_per_node": 8}, 4, "2"),  # a limit larger than the node's share of the host
    ({"nodes": 2, "cpus_per_node": 3, "nproc_per_node": 2}, 64, "1"),
])
def test_up_threads_from_host_cpus(kw, host, want, tmp_path):
    plan = plan_local(spec(**kw), cwd=tmp_path, host_cpus=host)
    assert {dict(c.env)["OMP_NUM_THREADS"] for c in plan.containers} == {want}


def test_user_value_wins_everywhere(tmp_path):
    s = spec(nodes=2, env={"OMP_NUM_THREADS": "7"}, cpus_per_node=4)
    plan = plan_local(s, cwd=tmp_path, host_cpus=2)
    assert dict(plan.containers[0].env)["OMP_NUM_THREADS"] == "7"
    for doc in (compose.render(s), pytorchjob.render(s), trainjob.render(s)):
        text = yaml.safe_dump(doc)
        assert "DDP_TRAIN_THREADS" not in text and text.count("OMP_NUM_THREADS") >= 1
        assert "'1'" not in [line.split(":")[-1].strip() for line in text.splitlines()
                             if "OMP_NUM_THREADS" in line]
    script = slurm.render(s)
    assert "export OMP_NUM_THREADS=7" in script and "SLURM_CPUS_ON_NODE" not in script


def test_up_dry_run_shows_the_threads(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ddpctl", "up", "--dry-run", "--nodes", "2"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    envs = [c["environment"] for c in yaml.safe_load(proc.stdout)["containers"]]
    want = str(max(1, (os.cpu_count() or 1) // 2))
    assert [e["OMP_NUM_THREADS"] for e in envs] == [want, want]
    proc = subprocess.run([sys.executable, "-m", "ddpctl", "up", "--dry-run", "--nodes", "2", "-e",
                           "OMP_NUM_THREADS=3"], capture_output=True, text=True, cwd=tmp_path)
    assert [c["environment"]["OMP_NUM_THREADS"] for c in yaml.safe_load(proc.stdout)["containers"]] == ["3", "3"]


# ------------------------------------------------------------------------------------------- compose

def _compose_envs(s):
    return [svc["environment"] for svc in compose.render(s)["services"].values()]


def test_compose_with_a_cpu_limit_is_static():
    for env in _compose_envs(spec(nodes=2, nproc_per_node=2, cpus_per_node=8)):
        assert env["OMP_NUM_THREADS"] == "4" and "DDP_TRAIN_THREADS" not in env


def test_compose_without_a_limit_decides_in_the_container_counting_the_nodes_on_the_host():
    for env in _compose_envs(spec(nodes=3)):
        assert env["DDP_TRAIN_THREADS"] == "auto" and env["DDP_TRAIN_NODES_PER_HOST"] == "3"
        assert "OMP_NUM_THREADS" not in env
    # one node per host (host networking): nothing shared
    files = compose.render_files(spec(nodes=2, network="host", hosts=["10.0.0.1", "10.0.0.2"]))
    for doc in files.values():
        env = next(iter(doc["services"].values()))["environment"]
        assert env["DDP_TRAIN_THREADS"] == "auto" and "DDP_TRAIN_NODES_PER_HOST" not in env


def test_a_users_own_program_gets_the_rule_too():
    """Two 1-process nodes of a user script on one host must not each take every core: the compose file asks
    the container's launcher to apply the rule, whatever the command."""
    env = _compose_envs(spec(nodes=2, command=["python", "train.py"]))[0]
    assert env["DDP_TRAIN_THREADS"] == "auto" and env["DDP_TRAIN_NODES_PER_HOST"] == "2"
    assert "OMP_NUM_THREADS" not in env
    mine = _compose_envs(spec(nodes=2, command=["python", "train.py"], env={"OMP_NUM_THREADS": "3"}))[0]
    assert mine["OMP_NUM_THREADS"] == "3" and "DDP_TRAIN_THREADS" not in mine


def test_the_launcher_applies_the_rule_to_any_command(monkeypatch):
    from ddp_train.runtime import threads as dt

    monkeypatch.setattr(dt, "available_cpus", lambda root="/sys/fs/cgroup": 8.0)
    argv = ["--tee", "3", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", "0", "--no-python",
            "python", "train.py", "--nproc-per-node", "9"]
    env = {"DDP_TRAIN_THREADS": "auto", "DDP_TRAIN_NODES_PER_HOST": "2"}
    dt.apply_for_launch(argv, env)
    assert env["OMP_NUM_THREADS"] == "2"  # 8 CPUs / (2 processes x 2 nodes on the host); the script's flag ignored
    env = {"DDP_TRAIN_THREADS": "auto"}
    dt.apply_for_launch(["--nproc_per_node=8", "-m", "mod"], env)
    assert env["OMP_NUM_THREADS"] == "1"
    untouched = {"OMP_NUM_THREADS": "5"}
    dt.apply_for_launch(argv, untouched)
    assert untouched == {"OMP_NUM_THREADS": "5"}  # no auto: the user's (or ddpctl's) value stays


# ------------------------------------------------------------------------------- PyTorchJob, TrainJob

def _k8s_env(doc):
    if doc["kind"] == "PyTorchJob":
        c = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in c["env"]}
    return {e["name"]: e["value"] for e in doc["spec"]["trainer"]["env"]}


@pytest.mark.parametrize("render", [pytorchjob.render, trainjob.render])
def test_k8s_threads_from_the_cpu_limit(render):
    env = _k8s_env(render(spec(nodes=2, gpus_per_node=8, cpus_per_node=96)))
    assert env["OMP_NUM_THREADS"] == "12" and "DDP_TRAIN_THREADS" not in env
    env = _k8s_env(render(spec(nodes=2, cpus_per_node=0.5)))
    assert env["OMP_NUM_THREADS"] == "1"


@pytest.mark.parametrize("render", [pytorchjob.render, trainjob.render])
def test_k8s_without_a_limit_decides_at_run_time(render):
    env = _k8s_env(render(spec(nodes=2, nproc_per_node=4)))
    assert env["DDP_TRAIN_THREADS"] == "auto" and "OMP_NUM_THREADS" not in env
    assert "DDP_TRAIN_NODES_PER_HOST" not in env  # one pod per node, each with its own CPUs


# ---------------------------------------------------------------------------------------------- Slurm

def _thread_snippet(s) -> str:
    return "set -euo pipefail\n" + "\n".join(launch.slurm_thread_lines(s)) + '\necho "T=$OMP_NUM_THREADS"\n'


@pytest.mark.parametrize("cpus_on_node, procs, want", [("8", 2, "4"), ("3", 4, "1"), ("64", 8, "8")])
def test_slurm_threads_from_slurm_cpus_on_node(cpus_on_node, procs, want):
    s = spec(nodes=2, nproc_per_node=procs)
    assert "\n".join(launch.slurm_thread_lines(s)) in slurm.render(s)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run(["bash", "-c", _thread_snippet(s)], capture_output=True, text=True,
                         env=dict(env, SLURM_CPUS_ON_NODE=cpus_on_node), check=True).stdout
    assert out.strip() == f"T={want}"


def test_slurm_value_is_shell_safe_and_an_exported_value_wins(tmp_path):
    s = spec(nodes=2, nproc_per_node=1)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    marker = tmp_path / "pwned"
    evil = f"a[$(touch {marker})]"
    out = subprocess.run(["bash", "-c", _thread_snippet(s)], capture_output=True, text=True,
                         env=dict(env, SLURM_CPUS_ON_NODE=evil), check=True).stdout
    assert not marker.exists()
    assert out.strip() == f"T={len(os.sched_getaffinity(0))}"  # falls back to nproc
    out = subprocess.run(["bash", "-c", _thread_snippet(s)], capture_output=True, text=True,
                         env=dict(env, SLURM_CPUS_ON_NODE="8", OMP_NUM_THREADS="3"), check=True).stdout
    assert out.strip() == "T=3"


# ------------------------------------------------------------------------- ddp_train's run-time half

@pytest.mark.parametrize("env, cpus, want", [
    ({}, 8, (8, "auto")),
    ({"LOCAL_WORLD_SIZE": "2"}, 8, (4, "auto")),
    ({"OMP_NUM_THREADS": "3", "LOCAL_WORLD_SIZE": "2"}, 8, (3, "OMP_NUM_THREADS")),
    # torchrun's own OMP_NUM_THREADS=1 (several local processes) is replaced in auto mode
    ({"OMP_NUM_THREADS": "1", "DDP_TRAIN_THREADS": "auto", "LOCAL_WORLD_SIZE": "2"}, 8, (4, "auto")),
    ({"DDP_TRAIN_THREADS": "auto", "DDP_TRAIN_NODES_PER_HOST": "2", "LOCAL_WORLD_SIZE": "2"}, 16, (4, "auto")),
    ({"DDP_TRAIN_THREADS": "auto", "LOCAL_WORLD_SIZE": "4"}, 2, (1, "auto")),
    ({"DDP_TRAIN_THREADS": "auto"}, 1.5, (1, "auto")),
    ({"OMP_NUM_THREADS": "zero", "LOCAL_WORLD_SIZE": "1"}, 4, (4, "auto")),
])
def test_runtime_decision(env, cpus, want):
    assert rt.decide(env, cpus=cpus) == want


def test_cgroup_v2_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert rt.cgroup_cpu_limit(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert rt.cgroup_cpu_limit(tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    d = tmp_path / "cpu"
    d.mkdir()
    (d / "cpu.cfs_quota_us").write_text("300000\n")
    (d / "cpu.cfs_period_us").write_text("100000\n")
    assert rt.cgroup_cpu_limit(tmp_path) == 3.0
    (d / "cpu.cfs_quota_us").write_text("-1\n")
    assert rt.cgroup_cpu_limit(tmp_path) is None
    assert rt.available_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_no_cgroup_files_means_the_affinity(tmp_path):
    assert rt.cgroup_cpu_limit(tmp_path) is None
    assert rt.available_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_apply_sets_env_and_torch_threads():
    code = ("import os, torch\nfrom ddp_train.runtime import threads\nn = threads.apply()\n"
            "print(n, os.environ['OMP_NUM_THREADS'], torch.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    env.update(DDP_TRAIN_THREADS="auto", OMP_NUM_THREADS="1", LOCAL_WORLD_SIZE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    n = len(os.sched_getaffinity(0))
    assert out.stdout.split() == [str(n)] * 3
