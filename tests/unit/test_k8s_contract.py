"""tests/support/k8s_contract.py: the emulated operator contract (PyTorchJob v1.9.4, TrainJob v2.3.0)."""


import pytest

import k8s_contract as kc
from ddpctl import launch
from ddpctl.render import pytorchjob, trainjob
from ddpctl.spec import spec_from_dict


def test_trainjob_port_ddpctl_assumes_is_the_operators():
    """The Trainer v2.3.0 torch plugin fixes the master port at 29500 (its source, not ours); ddpctl states it
    once (launch.TRAINJOB_MASTER_PORT) and the emulated operator uses that same constant."""
    assert launch.TRAINJOB_MASTER_PORT == 29500
    assert kc.TRAINJOB_MASTER_PORT is launch.TRAINJOB_MASTER_PORT


@pytest.mark.parametrize("text, env, want", [
    ("$(A)-x", {"A": "1"}, "1-x"),
    ("$$(A)", {"A": "1"}, "$(A)"),
    ("$(MISSING)", {}, "$(MISSING)"),
    ("$$$$", {}, "$$"),
    ("a$b $", {}, "a$b $"),
    ("$(A", {"A": "1"}, "$(A"),
])
def test_kubelet_expansion(text, env, want):
    assert kc.expand(text, env) == want


def test_pytorchjob_pods_and_injected_env():
    spec = spec_from_dict({"name": "pj", "nodes": 3, "gpus_per_node": 4, "shm_size": "2g", "port": 23500,
                           "volumes": ["/d:/data:ro"], "env": {"LIT": "$(PET_NNODES)"}})
    pods = kc.pytorchjob_pods(pytorchjob.render(spec))
    assert [p.hostname for p in pods] == ["pj-master-0", "pj-worker-0", "pj-worker-1"]
    assert [p.env["RANK"] for p in pods] == ["0", "1", "2"]
    assert [p.env["PET_NODE_RANK"] for p in pods] == ["0", "1", "2"]
    for p in pods:
        assert p.env["MASTER_ADDR"] == p.env["PET_MASTER_ADDR"] == "pj-master-0"
        assert p.env["MASTER_PORT"] == p.env["PET_MASTER_PORT"] == "23500"
        assert p.env["WORLD_SIZE"] == "12" and p.env["PET_NNODES"] == "3" and p.env["PET_NPROC_PER_NODE"] == "4"
        assert p.env["PYTHONUNBUFFERED"] == "1"
        assert p.env["LIT"] == "$(PET_NNODES)"  # escaped by the renderer, so not expanded
        assert p.argv == ("ddp-train-launch", "--no-python", "ddp-train")
        assert p.shm_size == 2 * 1024**3 and p.gpus == 4
        assert p.mounts == (kc.Mount("/d", "/data", True),)


def test_pytorchjob_without_master_gets_no_rendezvous_env():
    job = pytorchjob.render(spec_from_dict({"name": "nm", "nodes": 2}))
    job["spec"]["pytorchReplicaSpecs"].pop("Master")
    pods = kc.pytorchjob_pods(job)
    assert all("MASTER_ADDR" not in p.env and "RANK" not in p.env for p in pods)


def test_pytorchjob_default_port_when_unnamed():
    job = pytorchjob.render(spec_from_dict({"name": "dp"}))
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].pop("ports")
    assert kc.pytorchjob_pods(job)[0].env["MASTER_PORT"] == "23456"


def test_trainjob_pods():
    spec = spec_from_dict({"name": "tj", "nodes": 2, "gpus_per_node": 8})
    pods = kc.trainjob_pods(trainjob.render(spec))
    assert [p.hostname for p in pods] == ["tj-node-0-0", "tj-node-0-1"]
    assert pods[1].aliases == ("tj-node-0-1", "tj-node-0-1.tj")
    for i, p in enumerate(pods):
        assert {k: v for k, v in p.env.items() if k.startswith("PET_")} == {
            "PET_NNODES": "2", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": str(i),
            "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29500"}
        assert "MASTER_ADDR" not in p.env and "RANK" not in p.env
        assert p.shm_size == 16 * 1024**3 and p.gpus == 8


def test_trainjob_auto_nproc_on_cpu_uses_cpu_count():
    job = trainjob.render(spec_from_dict({"name": "auto", "cpus_per_node": 3}))
    del job["spec"]["trainer"]["numProcPerNode"]
    assert kc.trainjob_pods(job)[0].env["PET_NPROC_PER_NODE"] == "3"


def test_trainjob_rejects_pet_env():
    job = trainjob.render(spec_from_dict({"name": "pet"}))
    job["spec"]["trainer"]["env"].append({"name": "PET_NODE_RANK", "value": "0"})
    with pytest.raises(kc.ContractError):
        kc.trainjob_pods(job)


def test_quantities():
    assert kc.parse_quantity("16Gi") == 16 * 2**30
    assert kc.parse_quantity("500m") == 0.5
    assert kc.parse_quantity("2") == 2
    with pytest.raises(kc.ContractError):
        kc.parse_quantity("lots")
