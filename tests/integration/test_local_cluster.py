"""`ddpctl up | ps | logs | down` on the real Docker Engine with the CPU image (gloo)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from itest_helpers import DDPCTL, ddpctl, labelled

ENV_SCRIPT = """
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
line = json.dumps({"event": "env", "env": {k: os.environ.get(k) for k in keys}, "sum": t.item(),
                   "cwd": os.getcwd()})
os.write(1, (line + "\\n").encode())
dist.destroy_process_group()
"""

SLEEPER = """
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
os.write(1, b"READY\\n")
while True:
    time.sleep(0.5)
"""


def _events(stdout: str, event: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        text = line.split(" | ", 1)[-1]
        if text.startswith("{") and f'"event": "{event}"' in text:
            out.append((line.split(" | ", 1)[0].strip(), json.loads(text)))
    return out


def test_user_script_gets_torchrun_env_and_ps_logs_down(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "my_train.py").write_text(ENV_SCRIPT)
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--nproc-per-node", "2", "--workdir", ".",
                  "--", "python", "my_train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = _events(proc.stdout, "env")
    assert len(found) == 4
    ranks = sorted(int(e["env"]["RANK"]) for _, e in found)
    assert ranks == [0, 1, 2, 3]
    for node, e in found:
        env = e["env"]
        assert env["WORLD_SIZE"] == "4" and env["MASTER_ADDR"] == f"{job_name}-node-0"
        assert env["MASTER_PORT"] == "29500" and env["LOCAL_RANK"] in ("0", "1")
        # the prefix names the node the rank runs on and the global rank
        assert node == f"node-{int(env['RANK']) // 2} rank-{env['RANK']}"
        assert e["sum"] == 6.0 and e["cwd"] == "/workspace"

    ps = ddpctl("ps", check=True).stdout.splitlines()
    rows = [r.split() for r in ps if r.startswith(job_name)]
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [("0", f"{job_name}-node-0", "exited", "0"),
                                                          ("1", f"{job_name}-node-1", "exited", "0")]
    logs = ddpctl("logs", job_name, "--node", "1", check=True).stdout
    assert logs and all(line.startswith(("node-1 rank-2 | ", "node-1 rank-3 | ", "node-1        | "))
                        for line in logs.splitlines())
    assert len(_events(logs, "env")) == 2
    assert len(ddpctl("logs", job_name, "--tail", "1", check=True).stdout.splitlines()) == 2

    down = ddpctl("down", job_name, check=True)
    assert "removed 2 container(s) and 1 network(s)" in down.stderr
    assert labelled(engine, job_name) == ([], [])
    again = ddpctl("down", job_name)
    assert again.returncode == 0 and "nothing to remove" in again.stderr


def test_ddp_train_two_nodes_two_procs_passes_sync_check(engine, cpu_image, job_name):
    proc = ddpctl("up", "--name", job_name, "--nodes", "2", "--nproc-per-node", "2", "--image", cpu_image,
                  "--rm", timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    node0 = [line.split(" | ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("node-0 rank-0 | ")]
    summaries = [json.loads(x) for x in node0 if x.startswith("{") and '"summary"' in x]
    assert summaries, proc.stdout[-2000:]
    summary = summaries[-1]
    assert summary["world_size"] == 4
    assert summary["sync_check"] == "pass"
    assert summary["backend"] == "gloo"
    assert labelled(engine, job_name) == ([], [])  # --rm


def test_node_killed_mid_run_fails_the_job_naming_the_node(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    env = dict(os.environ, NO_COLOR="1")
    up = subprocess.Popen([DDPCTL, "up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--workdir", ".", "--",
                           "python", "sleeper.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready = 0
        deadline = time.monotonic() + 120
        while ready < 2 and time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            ready += "READY" in line
        assert ready == 2, "both nodes should join the process group"
        engine.containers.get(f"{job_name}-node-1").kill()
        out, err = up.communicate(timeout=120)
    finally:
        if up.poll() is None:
            up.kill()
    assert up.returncode != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: node 1 (") and f"{job_name}-node-1" in last and "137" in last
    states = {c.name: c.status for c in engine.containers.list(all=True, filters={"label": f"ddpctl.job={job_name}"})}
    assert states and all(s == "exited" for s in states.values())  # the job was stopped, not left running


def test_ctrl_c_stops_and_removes_the_job(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    up = subprocess.Popen([DDPCTL, "up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--workdir", ".", "--",
                           "python", "sleeper.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=dict(os.environ, NO_COLOR="1"))
    try:
        ready = 0
        while ready < 2:
            line = up.stdout.readline()
            assert line, "up ended early"
            ready += "READY" in line
        up.send_signal(signal.SIGINT)
        _, err = up.communicate(timeout=60)
    finally:
        if up.poll() is None:
            up.kill()
    assert up.returncode == 130
    assert "stopped and removed" in err
    assert labelled(engine, job_name) == ([], [])


def _assert_clean_error(proc, needle: str, engine, job: str, code: int = 2):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    if engine is not None:
        assert labelled(engine, job) == ([], [])


def test_bad_inputs_fail_in_one_line_and_leave_nothing(engine, cpu_image, job_name, tmp_path):
    _assert_clean_error(ddpctl("up", "--name", job_name, "--image", "ddpctl/no-such-image:x", "-d"),
                        "image ddpctl/no-such-image:x is not present", engine, job_name)
    _assert_clean_error(ddpctl("up", "--name", job_name, "--gpus-per-node", "1", "--image", cpu_image, "-d"),
                        "asks for 1 GPU(s) but this host has 0 GPU(s)", engine, job_name)
    _assert_clean_error(ddpctl("up", "--name", job_name, "--image", cpu_image, "--workdir", str(tmp_path / "gone"), "-d"),
                        f"bind-mount source {tmp_path / 'gone'} (for /workspace) does not exist", engine, job_name)
    dead = f"unix://{tmp_path}/no-daemon.sock"
    _assert_clean_error(ddpctl("up", "--name", job_name, "-d", env={"DOCKER_HOST": dead}),
                        f"cannot reach the Docker Engine at {dead}", engine, job_name, code=1)
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        _assert_clean_error(ddpctl("up", "--name", job_name, "--image", cpu_image, "--network", "host", "--port", str(port), "-d"),
                            f"port {port} is already in use", engine, job_name)


def test_name_clash_with_a_running_job(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--workdir", ".", "-d", "--", "python", "sleeper.py",
           cwd=tmp_path, check=True)
    before = labelled(engine, job_name)
    clash = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "-d")
    _assert_clean_error(clash, f"job {job_name} is already running (2 container(s))", None, job_name)
    assert labelled(engine, job_name) == before  # the running job is untouched
    assert ddpctl("down", job_name).returncode == 0
    assert labelled(engine, job_name) == ([], [])


def test_creation_is_all_or_nothing(engine, cpu_image, job_name, tmp_path):
    """The real engine, with one fault injected: the second container's create fails."""
    from ddpctl.dockerengine.docker_engine import DockerEngine
    from ddpctl.errors import EngineError
    from ddpctl.local import executor
    from ddpctl.local.plan import plan_local
    from ddpctl.spec import spec_from_dict

    class FailingSecondCreate(DockerEngine):
        calls = 0

        def create_container(self, request):
            self.calls += 1
            if self.calls == 2:
                # a real engine error: a name that is not valid for a container
                request = dict(request, name="bad name!")
            return super().create_container(request)

    plan = plan_local(spec_from_dict({"name": job_name, "nodes": 3, "image": cpu_image}), cwd=tmp_path)
    with pytest.raises(EngineError, match="nothing was left behind"):
        executor.up(plan, FailingSecondCreate(engine), host_gpus=0)
    assert labelled(engine, job_name) == ([], [])
