"""One container model: `ddpctl up`'s Docker request and the compose service serialise the same ContainerPlan."""

from pathlib import Path

import pytest

from ddpctl.local.plan import container_request, plan_containers, plan_local
from ddpctl.render import compose
from ddpctl.spec import spec_from_dict
from ddpctl.spec.units import docker_size

CWD = Path("/home/u/proj")

SPECS = [
    {"name": "a", "nodes": 2, "nproc_per_node": 2},
    {"name": "b", "nodes": 2, "gpus_per_node": 2, "device_ids": ["0", "1", "2", "3"], "memlock": True,
     "shm_size": "2g", "cpus_per_node": 1.5, "memory_per_node": "4g", "env": {"A": "$x"}},
    {"name": "c", "gpus_per_node": 1, "network": "host", "user": "1000:1000", "secret_env": ["TOKEN"],
     "volumes": ["/abs/data:/data:ro"], "workdir": "/abs/code", "ipc": "private", "max_restarts": 2},
]


def _without_job_restarts(req: dict) -> dict:
    """`up --max-restarts` restarts the whole job itself (ddpctl.local.restarts): its checkpoint volume, env,
    label and ddp-train's --output-dir are what it adds to the shared container model."""
    from ddpctl.local import restarts

    if restarts.LABEL_RESTARTS not in req["labels"]:
        return req
    cmd = req["command"]
    if cmd[-2:] == ["--output-dir", restarts.CHECKPOINT_DIR]:
        cmd = cmd[:-2]
    return {**req, "command": cmd,
            "environment": {k: v for k, v in req["environment"].items()
                            if k not in (restarts.CHECKPOINT_ENV, restarts.RESTART_ENV)},
            "labels": {k: v for k, v in req["labels"].items() if k != restarts.LABEL_RESTARTS},
            "mounts": [m for m in req["mounts"] if m["target"] != restarts.CHECKPOINT_DIR]}


@pytest.mark.parametrize("data", SPECS, ids=[d["name"] for d in SPECS])
def test_compose_service_and_docker_request_agree(data):
    spec = spec_from_dict(data)
    services = compose.render(spec)["services"]
    plan = plan_local(spec, cwd=CWD)
    for c in plan.containers:
        req, svc = _without_job_restarts(container_request(c, {"TOKEN": "v"})), services[c.name]
        if spec.max_restarts:  # compose: torchrun's own restarts and a restart policy instead
            i = svc["command"].index("--max-restarts")
            svc = {**svc, "command": svc["command"][:i] + svc["command"][i + 2:]}
        assert svc["command"] == [w.replace("$", "$$") for w in req["command"]]
        assert set(svc["environment"]) == set(req["environment"])
        assert svc["labels"] == req["labels"] and svc.get("user") == req.get("user")
        assert svc.get("hostname") == req.get("hostname") and svc.get("working_dir") == req.get("working_dir")
        assert svc.get("ipc") == req.get("ipc_mode") and svc.get("shm_size") == req.get("shm_size")
        assert svc["ulimits"] == {u["name"]: u["soft"] for u in req["ulimits"]}
        assert [v.split(":")[0] for v in svc.get("volumes", [])] == [m["source"] for m in req.get("mounts", [])]
        if "mem_limit" in req:
            assert svc["mem_limit"] == docker_size(req["mem_limit"])
        if "nano_cpus" in req:
            assert svc["cpus"] * 10**9 == req["nano_cpus"]
        if "device_requests" in req:
            (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
            (want,) = req["device_requests"]
            assert dev["capabilities"] == want["capabilities"][0]
            assert {k: v for k, v in dev.items() if k != "capabilities"} == \
                   {k: v for k, v in want.items() if k != "capabilities"}


def test_host_networking_sets_no_hostname_anywhere():
    """Docker refuses a hostname together with network_mode: host; compose left it out, `up` sent it."""
    spec = spec_from_dict({"name": "h", "network": "host"})
    req = container_request(plan_local(spec, cwd=CWD).containers[0])
    assert req["network_mode"] == "host" and "hostname" not in req
    assert "hostname" not in compose.render(spec)["services"]["h-node-0"]


def test_private_ipc_is_explicit_in_both():
    spec = spec_from_dict({"name": "p", "ipc": "private"})
    assert container_request(plan_local(spec, cwd=CWD).containers[0])["ipc_mode"] == "private"
    assert compose.render(spec)["services"]["p-node-0"]["ipc"] == "private"


def test_path_resolution_is_a_parameter():
    spec = spec_from_dict({"name": "r", "volumes": ["./data:/data"], "workdir": "."})
    kept = plan_containers(spec, cwd=None)[0]
    resolved = plan_containers(spec, cwd=CWD)[0]
    assert [m.source for m in kept.mounts] == ["./data", "."]
    assert [m.source for m in resolved.mounts] == ["/home/u/proj/data", "/home/u/proj"]
    assert compose.render(spec)["services"]["r-node-0"]["volumes"] == ["./data:/data", ".:/workspace"]
