"""Kubernetes contract check without a cluster.

This test EMULATES the training operators: it renders a PyTorchJob and a TrainJob, asks
``tests/support/k8s_contract.py`` for the pods the operator would create (names, hostnames and DNS aliases, the
injected MASTER_ADDR / PET_* env, the expanded command; see docs/render.md), starts each pod as a
container on one private network with those hostnames and aliases, and checks that the job completes with
a passing sync check. No Kubernetes API server, kubelet or operator runs here; what is checked is that the
rendered manifests plus the operator's documented contract give a working torchrun job.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from itest_helpers import CPU_IMAGE, ddpctl, labelled


def _run_pods(engine, job: str, pods) -> dict[str, tuple[int, str]]:
    """Start every pod as a container on one network (hostname + aliases as the operator's Services /
    JobSet subdomain give them); wait for all; return name -> (exit code, logs). Removes everything."""
    labels = {"ddpctl.job": job, "app.kubernetes.io/managed-by": "ddpctl", "ddpctl.purpose": "k8s-contract"}
    net = engine.networks.create(f"{job}-net", driver="bridge", labels=labels)
    containers = []
    try:
        api = engine.api
        for pod in pods:
            host_config = api.create_host_config(network_mode=net.name, shm_size=pod.shm_size or None)
            endpoint = api.create_endpoint_config(aliases=list(pod.aliases))
            made = api.create_container(
                pod.image, list(pod.argv), name=pod.name, hostname=pod.hostname, environment=pod.env,
                labels={**labels, "ddpctl.node-rank": str(pod.index)}, host_config=host_config,
                networking_config=api.create_networking_config({net.name: endpoint}))
            containers.append(engine.containers.get(made["Id"]))
        for c in containers:
            c.start()
        results = {}
        for pod, c in zip(pods, containers, strict=True):
            code = c.wait(timeout=300)["StatusCode"]
            results[pod.name] = (code, c.logs().decode("utf-8", "replace"))
        return results
    finally:
        for c in containers:
            c.remove(force=True)
        net.remove()


def _summary(logs: str) -> dict:
    # ddp-train-launch (ExitCode jobs) prefixes each worker line with its global rank: "rank-0 | {...}"
    lines = [re.sub(r"^rank-\d+ \| ", "", line) for line in logs.splitlines()]
    found = [json.loads(line) for line in lines if line.startswith('{"event": "summary"')]
    assert found, logs[-2000:]
    return found[-1]


@pytest.mark.parametrize("kind, extra", [("pytorchjob", []), ("trainjob", []),
                                         ("pytorchjob", ["--restart-policy", "ExitCode"])],
                         ids=["pytorchjob", "trainjob", "pytorchjob-exitcode"])
def test_operator_pods_complete_with_a_passing_sync_check(engine, cpu_image, job_name, kind, extra):
    from k8s_contract import pods_for

    text = ddpctl("render", kind, "--name", job_name, "--nodes", "2", "--nproc-per-node", "2",
                  "--image", CPU_IMAGE, *extra, check=True).stdout
    doc = yaml.safe_load(text)
    pods = pods_for(doc)
    assert len(pods) == 2
    if kind == "pytorchjob":
        assert [p.hostname for p in pods] == [f"{job_name}-master-0", f"{job_name}-worker-0"]
        assert all(p.env["MASTER_ADDR"] == f"{job_name}-master-0" for p in pods)
    else:
        assert all(p.env["PET_MASTER_ADDR"] == f"{job_name}-node-0-0.{job_name}" for p in pods)
        assert any(f"{job_name}-node-0-0.{job_name}" in p.aliases for p in pods)
    # every pod starts through ddp-train-launch (torchrun that keeps the workers' exit codes)
    assert {p.argv[0] for p in pods} == {"ddp-train-launch"}
    results = _run_pods(engine, job_name, pods)
    assert [code for code, _ in results.values()] == [0, 0], {k: v[1][-1500:] for k, v in results.items()}
    summary = _summary(results[pods[0].name][1])
    assert summary["world_size"] == 4 and summary["sync_check"] == "pass"
    assert labelled(engine, job_name) == ([], [])
