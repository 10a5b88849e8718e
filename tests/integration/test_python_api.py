"""The Python API on the real Docker Engine with the CPU image: ddpctl.up and a Job's status, logs, wait and down
(the job test_local_cluster runs through the CLI, compared with what the CLI prints), ddpctl.job / ddpctl.jobs
(also after down), and ddpctl.run with a function defined in __main__, a lambda, a closure, a rank that raises,
one that is killed and a return value that cannot be serialised."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ddpctl
from itest_helpers import ddpctl as cli

ENV_SCRIPT = """
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
keys = ["RANK", "WORLD_SIZE", "MASTER_ADDR"]
print(json.dumps({"event": "env", "env": {k: os.environ.get(k) for k in keys}, "sum": t.item()}), flush=True)
dist.destroy_process_group()
"""


def test_up_then_status_logs_wait_down_and_the_job_after_down(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "my_train.py").write_text(ENV_SCRIPT)
    job = ddpctl.up(name=job_name, image=cpu_image, nodes=2, workdir=str(tmp_path), command=["python", "my_train.py"])
    assert isinstance(job, ddpctl.Job) and job.name == job_name
    outcome = job.wait(timeout=600)  # a bound, not a target: a loaded 2-core machine takes minutes
    assert outcome.exit_code == 0 and outcome.succeeded, outcome
    assert outcome.node_exit_codes == {0: 0, 1: 0}

    lines = list(job.logs())
    assert lines == cli("logs", job_name, check=True).stdout.splitlines()  # the same lines as 'ddpctl logs'
    events = [json.loads(line.split(" | ", 1)[1]) for line in lines if '"event": "env"' in line]
    assert sorted(e["env"]["RANK"] for e in events) == ["0", "1"] and {e["sum"] for e in events} == {1.0}
    assert list(job.logs(node=1)) == [ln for ln in lines if ln.startswith("node-1")]

    status = job.status()
    as_cli = json.loads(cli("status", job_name, "--json", check=True).stdout)
    assert isinstance(status, ddpctl.JobStatus) and status.state == "exited" and status.result == "succeeded"
    assert [n.exit_code for n in status.nodes] == [0, 0] and status.nodes[1].node == 1
    for key in ("job", "source", "state", "result", "restarts", "ranks", "progress", "summary"):
        assert status.to_dict()[key] == as_cli[key], key

    assert ddpctl.job(job_name) == job
    assert job_name in [j.name for j in ddpctl.jobs()]
    removed = job.down()
    assert (removed.containers, removed.networks) == (2, 1) and removed.kept is not None
    assert not job.down()  # safe to repeat: nothing left to remove

    # gone: read from its kept output
    assert job.status().source == "kept" and job.status().result == "succeeded"
    assert list(job.logs()) == lines
    assert ddpctl.job(job_name).wait().exit_code == 0
    assert job_name in [j.name for j in ddpctl.jobs()]
    assert job_name not in [j.name for j in ddpctl.jobs(kept=False)]


def test_a_failed_job_gives_the_exit_code_of_the_cli_and_bad_input_starts_nothing(engine, cpu_image, job_name):
    with pytest.raises(ddpctl.BadInput, match="'nodes'"):
        ddpctl.up(name=job_name, image=cpu_image, nodes=0)
    assert engine.containers.list(all=True, filters={"label": f"ddpctl.job={job_name}"}) == []
    job = ddpctl.up(name=job_name, image=cpu_image, nodes=2,
                    command=["python", "-c", "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"])
    outcome = job.wait(timeout=600)  # a bound, not a target: a loaded 2-core machine takes minutes
    assert outcome.exit_code == 3 and outcome.rank == 1 and not outcome.succeeded
    assert outcome.message.startswith(f"node 1 ({job_name}-node-1) of job {job_name}")
    with pytest.raises(ddpctl.JobFailed) as failed:
        outcome.check()
    assert failed.value.exit_code == 3
    job.down()
    sleeper = ddpctl.up(name=job_name, image=cpu_image, nodes=1, command=["sleep", "60"])
    with pytest.raises(TimeoutError):
        sleeper.wait(timeout=1)


MAIN_SCRIPT = """
import json, os, sys
import ddpctl

def where(scale):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")  # the process group: one call
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    return {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")} | {"sum": t.item() * scale}

print(json.dumps(ddpctl.run(where, 10, nodes=2, image=sys.argv[1], name=sys.argv[2])))
"""


def test_run_a_function_defined_in_main(engine, cpu_image, job_name, tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text(MAIN_SCRIPT)
    out = subprocess.run([sys.executable, str(script), cpu_image, job_name], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    values = json.loads(out.stdout)
    assert [v["RANK"] for v in values] == ["0", "1"] and {v["WORLD_SIZE"] for v in values} == {"2"}
    assert {v["MASTER_ADDR"] for v in values} == {f"{job_name}-node-0"} and {v["sum"] for v in values} == {30.0}


def test_run_a_lambda_and_a_closure(engine, cpu_image, job_name):
    assert ddpctl.run(lambda: int(os.environ["RANK"]) * 2, nodes=2, image=cpu_image, name=job_name) == [0, 2]
    factor = 7

    def times(values):
        return [v * factor for v in values] + [int(os.environ["RANK"])]

    assert ddpctl.run(times, [1, 2], nodes=1, nproc_per_node=2, image=cpu_image, name=job_name) == [
        [7, 14, 0], [7, 14, 1]]


def test_run_a_rank_that_raises(engine, cpu_image, job_name):
    def boom():
        if os.environ["RANK"] == "1":
            raise ValueError("boom on rank 1")
        return "fine"

    with pytest.raises(ddpctl.RemoteError) as caught:
        ddpctl.run(boom, nodes=2, image=cpu_image, name=job_name)
    err = caught.value
    assert err.rank == 1 and err.remote_type == "builtins.ValueError"
    assert err.message.startswith("rank 1 of ddpctl.run raised ValueError: boom on rank 1")
    assert "in boom" in err.remote_traceback and "ValueError: boom on rank 1" in err.remote_traceback
    assert isinstance(err.exception, ValueError) and err.job == job_name
    assert any("boom on rank 1" in line for line in ddpctl.job(job_name).logs())  # kept after the run


def test_run_a_rank_that_is_killed(engine, cpu_image, job_name):
    def die():
        import signal
        import time

        if os.environ["RANK"] == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(2)
        return "fine"

    with pytest.raises(ddpctl.RemoteError, match=r"rank 1 of ddpctl.run ended without returning") as caught:
        ddpctl.run(die, nodes=2, image=cpu_image, name=job_name)
    assert caught.value.rank == 1


def test_run_a_value_that_cannot_be_serialised_and_bad_input(engine, cpu_image, job_name):
    import threading

    with pytest.raises(ddpctl.RemoteError) as caught:
        ddpctl.run(lambda: threading.Lock(), nodes=2, image=cpu_image, name=job_name)
    assert caught.value.message.startswith("rank 0 of ddpctl.run returned a value that cannot be serialised "
                                           "(_thread.lock: TypeError")
    for bad, match in (({"args": (threading.Lock(),)}, "cannot be serialised"), ({"nodes": 0}, "'nodes'"),
                       ({"command": ["x"]}, "does not take command=")):
        args = bad.pop("args", ())
        with pytest.raises(ddpctl.BadInput, match=match):
            ddpctl.run(lambda *a: 1, *args, image=cpu_image, name=job_name, **bad)
    assert engine.containers.list(all=True, filters={"label": f"ddpctl.job={job_name}"}) == []
