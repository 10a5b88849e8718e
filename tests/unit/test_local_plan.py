"""ddpctl.local.plan: spec -> containers. The launch contract itself is launch.local_nodes' (one copy)."""

from pathlib import Path

import pytest

from ddpctl import launch
from ddpctl.errors import UnsupportedFeature
from ddpctl.local.plan import container_request, plan_local
from ddpctl.spec import spec_from_dict

CWD = Path("/home/u/proj")


def test_cpu_plan_uses_the_launch_contract_and_requests_no_gpu():
    spec = spec_from_dict({"name": "j", "nodes": 2, "nproc_per_node": 2})
    plan = plan_local(spec, cwd=CWD)
    nodes = launch.local_nodes(spec)
    assert plan.network == "j-net" and plan.world_size == 4 and not plan.wants_gpus
    for c, n in zip(plan.containers, nodes, strict=True):
        req = container_request(c)
        assert req["command"] == list(n.argv) and req["environment"] == n.env_dict
        assert req["labels"] == dict(n.labels) and req["name"] == req["hostname"] == n.name
        assert req["network"] == "j-net" and req["ipc_mode"] == "host"
        assert "device_requests" not in req and "shm_size" not in req
        assert req["ulimits"] == [{"name": "stack", "soft": launch.STACK_ULIMIT, "hard": launch.STACK_ULIMIT}]
    assert plan.to_dict()["containers"] == [container_request(c) for c in plan.containers]


def test_gpus_split_by_device_ids_on_one_host():
    spec = spec_from_dict({"name": "g", "nodes": 2, "gpus_per_node": 2, "device_ids": ["0", "1", "2", "3"]})
    plan = plan_local(spec, cwd=CWD)
    reqs = [container_request(c)["device_requests"] for c in plan.containers]
    assert reqs == [[{"driver": "nvidia", "capabilities": [["gpu"]], "device_ids": ["0", "1"]}],
                    [{"driver": "nvidia", "capabilities": [["gpu"]], "device_ids": ["2", "3"]}]]
    assert plan.gpus_total == 4 and plan.image == "ddpctl/ddp-train:cuda"


def test_shm_memlock_workdir_volumes():
    spec = spec_from_dict({"name": "v", "shm_size": "2g", "memlock": True, "workdir": ".",
                           "volumes": ["./data:/data:ro", "/abs/out:/out", "cache/x:/cache"]})
    req = container_request(plan_local(spec, cwd=CWD).containers[0])
    assert "ipc_mode" not in req and req["shm_size"] == "2g"
    assert {"name": "memlock", "soft": -1, "hard": -1} in req["ulimits"]
    assert req["working_dir"] == "/workspace"
    assert req["mounts"] == [
        {"type": "bind", "source": "/home/u/proj/data", "target": "/data", "read_only": True},
        {"type": "bind", "source": "/abs/out", "target": "/out", "read_only": False},
        # a bare relative path is a directory here on every target (a bare name is refused: ddpctl.rules)
        {"type": "bind", "source": "/home/u/proj/cache/x", "target": "/cache", "read_only": False},
        {"type": "bind", "source": "/home/u/proj", "target": "/workspace", "read_only": False},
    ]


def test_host_network_single_node():
    plan = plan_local(spec_from_dict({"name": "h", "network": "host", "port": 29600}), cwd=CWD)
    req = container_request(plan.containers[0])
    assert plan.host_network and plan.network is None and req["network_mode"] == "host"
    assert "--master-addr" in req["command"] and "127.0.0.1" in req["command"]


def test_multi_host_is_not_for_up():
    spec = spec_from_dict({"name": "m", "nodes": 2, "network": "host", "hosts": ["10.0.0.1", "10.0.0.2"]})
    with pytest.raises(UnsupportedFeature, match="render compose"):
        plan_local(spec, cwd=CWD)


def test_containers_run_as_the_caller_with_a_writable_home_unless_user_is_given():
    spec = spec_from_dict({"name": "u", "nodes": 2, "workdir": "."})
    reqs = [container_request(c) for c in plan_local(spec, cwd=CWD, default_user="1000:1000").containers]
    assert [r["user"] for r in reqs] == ["1000:1000", "1000:1000"]
    assert all(r["environment"]["HOME"] == "/tmp" for r in reqs)
    assert reqs[0]["command"][0] == "ddp-train-launch"  # rank-prefixed lines, one root-cause line
    root = container_request(plan_local(spec_from_dict({"name": "u", "user": "root"}), cwd=CWD,
                                        default_user="1000:1000").containers[0])
    assert root["user"] == "root" and "HOME" not in root["environment"]
    own_home = container_request(plan_local(spec_from_dict({"name": "u", "env": {"HOME": "/h"}}), cwd=CWD,
                                            default_user="7:7").containers[0])
    assert own_home["environment"]["HOME"] == "/h"
    assert "user" not in container_request(plan_local(spec, cwd=CWD).containers[0])  # the image's user
    # nothing of the host mounted (named volumes are refused by the spec): the image's user, whose /workspace
    # it is
    req = container_request(plan_local(spec_from_dict({"name": "u"}), cwd=CWD, default_user="7:7").containers[0])
    assert "user" not in req and "HOME" not in req["environment"]
    bind_volume = spec_from_dict({"name": "u", "volumes": ["/data:/data"]})
    assert container_request(plan_local(bind_volume, cwd=CWD, default_user="7:7").containers[0])["user"] == "7:7"


@pytest.mark.parametrize("target, needle", [
    ("pytorchjob", "pytorchjob does not support user: a pod's user comes from its securityContext"),
    ("trainjob", "trainjob does not support user"),
    ("slurm", "slurm does not support user: Slurm jobs run as the user who submits them"),
])
def test_cluster_targets_reject_user_with_the_fix(target, needle):
    from ddpctl.render import render_files

    with pytest.raises(UnsupportedFeature, match=needle):
        render_files(target, spec_from_dict({"name": "u", "user": "1000"}))


@pytest.mark.parametrize("value", ["", "a b", "1000:", ":1000", "x" * 40, "1:2:3"])
def test_bad_user_values_are_spec_errors(value):
    from ddpctl.errors import SpecError

    with pytest.raises(SpecError, match="'user'"):
        spec_from_dict({"user": value})
