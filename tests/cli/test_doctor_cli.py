"""``ddpctl doctor`` on this machine with one dependency missing or broken at a time.

Real: the probes (PATH lookups, processes, sockets, /sys, /dev/shm, the Docker SDK against a dead socket).
Stand-in: ``kubectl`` for the context/CRD checks (no Kubernetes API server can run here; the script answers
what ``kubectl config current-context`` and ``kubectl get crd -o name`` print on a cluster with the CRDs).
The real Docker Engine, GPU engine and Slurm cluster cases are in tests/integration/test_gpu_requests.py,
tests/integration/test_doctor_engine.py and tests/slurm/test_doctor_slurm.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

KUBECTL = """#!/bin/sh
case "$*" in
  "config current-context") echo kind-ml ;;
  "get crd -o name") printf '%s\\n' {crds} ;;
  *) echo "stand-in kubectl: unexpected $*" >&2; exit 9 ;;
esac
"""


def doctor(*args, env=None, path=None):
    code = "import sys\nfrom ddpctl.cli.main import main\nmain(sys.argv[1:])"
    full = dict(os.environ, **(env or {}))
    if path is not None:
        full["PATH"] = path
    return subprocess.run([sys.executable, "-c", code, "doctor", *args], capture_output=True, text=True,
                          env=full, timeout=120)


def lines(proc) -> dict[str, str]:
    """check name -> its status, from the text output."""
    out = {}
    for line in proc.stdout.splitlines():
        status, _, rest = line.partition("  ")
        if status.strip() in ("ok", "warn", "fail"):
            out[rest.strip().split(":", 1)[0]] = status.strip()
    return out


def bin_with(tmp_path, **scripts) -> str:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for name, text in scripts.items():
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return str(d)


def test_help_has_examples():
    proc = doctor("--help")
    assert proc.returncode == 0 and "Examples" in proc.stdout and "--target" in proc.stdout


def test_dead_docker_socket_fails_with_the_fix(tmp_path):
    dead = tmp_path / "docker.sock"
    proc = doctor("--target", "compose", "--port", "1", env={"DOCKER_HOST": f"unix://{dead}"})
    assert proc.returncode == 1
    line = next(x for x in proc.stdout.splitlines() if x.startswith("fail  docker:"))
    assert str(dead) in line and "fix: start dockerd" in line
    assert proc.stdout.splitlines()[-1].startswith("doctor (compose):")


def test_json_has_every_check_and_the_verdict(tmp_path):
    proc = doctor("--json", "--port", "1", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    report = json.loads(proc.stdout)
    assert report["target"] == "local" and report["ok"] is False and proc.returncode == 1
    assert [c["name"] for c in report["checks"]][:2] == ["docker", "/dev/shm"]
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in report["checks"])


def test_k8s_without_kubectl(tmp_path):
    proc = doctor("--target", "k8s", path=bin_with(tmp_path))  # an empty PATH: no kubectl
    assert proc.returncode == 1
    assert lines(proc)["kubectl"] == "fail" and "fix: install kubectl" in proc.stdout


def test_k8s_with_context_and_crds(tmp_path):
    crds = ("customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org "
            "customresourcedefinition.apiextensions.k8s.io/trainjobs.trainer.kubeflow.org")
    path = bin_with(tmp_path, kubectl=KUBECTL.format(crds=crds)) + ":/usr/bin:/bin"
    proc = doctor("--target", "k8s", path=path)
    got = lines(proc)
    assert got["kube context"] == "ok" and got["PyTorchJob CRD"] == "ok" and got["TrainJob CRD"] == "ok"
    assert proc.returncode == 0, proc.stdout


def test_k8s_without_crds_fails(tmp_path):
    path = bin_with(tmp_path, kubectl=KUBECTL.format(crds="")) + ":/usr/bin:/bin"
    proc = doctor("--target", "k8s", path=path)
    assert proc.returncode == 1 and lines(proc)["PyTorchJob CRD"] == "fail" and "training-operator" in proc.stdout


def test_slurm_without_the_commands(tmp_path):
    proc = doctor("--target", "slurm", path=bin_with(tmp_path))
    assert proc.returncode == 1 and lines(proc)["slurm commands"] == "fail"
    assert "sbatch, srun, scontrol" in proc.stdout


def test_busy_master_port_fails_with_host_networking():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = doctor("--target", "compose", "--network", "host", "--port", str(port),
                      env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert lines(proc)["master port"] == "fail" and f"{port} is in use" in proc.stdout


def test_nccl_socket_ifname_that_matches_nothing(tmp_path):
    proc = doctor("--target", "slurm", env={"NCCL_SOCKET_IFNAME": "nosuchnic9"}, path=bin_with(tmp_path))
    assert lines(proc)["NCCL_SOCKET_IFNAME"] == "fail" and "matches no interface" in proc.stdout


@pytest.mark.parametrize("args, needle", [
    (["--target", "aws"], "--target 'aws' is not one of local, compose, k8s, slurm"),
    (["--container", "docker"], "--container 'docker' is not one of none, pyxis, apptainer"),
    (["--nodes", "0"], "--nodes must be >= 1"),
    (["--nodes", "0:2"], "--nodes must be >= 1"),
    (["--nodes", "two"], "--nodes 'two' is not a node count or MIN:MAX"),
    (["--nodes", "4:2"], "--nodes 4:2: MIN is above MAX"),
    (["--port", "70000"], "--port 70000 is not a TCP port"),
])
def test_usage_errors_are_one_line_exit_2(args, needle):
    proc = doctor(*args)
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_elastic_nodes_are_checked_for_their_most(tmp_path):
    """--nodes MIN:MAX (as 'up'/'render' take it): the checks plan for MAX nodes (here 3 x 2 GPUs)."""
    proc = doctor("--nodes", "1:3", "--gpus-per-node", "2", "--json", path=bin_with(tmp_path))
    gpus = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "GPUs"]
    assert proc.returncode == 1 and gpus and gpus[0]["detail"].startswith("6 GPU(s) asked for"), proc.stdout
