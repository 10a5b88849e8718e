"""Elastic jobs on the renderers: `nodes: MIN:MAX`, restarts and requeues, and what each target refuses.

The rendered files themselves are golden cases (tests/support/render_cases.py: pytorchjob elastic/restarts-fixed, slurm
requeue-signal/elastic/requeue-pyxis), validated against the CRDs and webhook rules by test_render_validate.py;
the pods the operator would make of them come from tests/support/k8s_contract.py (an emulation: no API server here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpctl.errors import SpecError, UnsupportedFeature
from ddpctl.local.plan import plan_local
from ddpctl.render import render_files
from ddpctl.spec import spec_from_dict, spec_to_dict
from k8s_contract import after_exit, pods_for

DDPCTL = str(Path(sys.executable).with_name("ddpctl"))


def _one(target, data):
    [(_, text)] = render_files(target, spec_from_dict(data)).items()
    return text


@pytest.mark.parametrize("value,lo,hi", [("1:4", 1, 4), (" 2 : 3 ", 2, 3), ("3:3", 3, 3), (2, None, 2), ("5", None, 5)])
def test_nodes_count_or_range(value, lo, hi):
    s = spec_from_dict({"nodes": value})
    assert (s.min_nodes, s.nodes) == (lo, hi)
    assert s.elastic == (lo is not None and lo < hi)
    assert spec_from_dict(spec_to_dict(s)) == s  # the round trip (--dry-run)


@pytest.mark.parametrize("data,needle", [
    ({"nodes": "4:2"}, "MIN is above MAX"), ({"nodes": "1:x"}, "a node count or MIN:MAX"),
    ({"nodes": "0:2"}, "nodes"), ({"nodes": "1:2", "min_nodes": 2}, "give the range once"),
    ({"nodes": "1:2", "network": "host", "hosts": ["a", "b"]}, "fixed set of hosts"),
    ({"slurm": {"signal_seconds": 60}}, "needs a time limit")])
def test_bad_ranges_and_signal_without_time(data, needle):
    with pytest.raises(SpecError, match=needle):
        spec_from_dict(data)


@pytest.mark.parametrize("target,reason", [
    ("compose", "static rendezvous at node 0"),
    ("trainjob", "numNodes is fixed"),
])
def test_targets_that_cannot_be_elastic_say_why(target, reason):
    with pytest.raises(UnsupportedFeature, match=reason) as err:
        render_files(target, spec_from_dict({"nodes": "1:2"}))
    assert "nodes MIN:MAX" in str(err.value) and err.value.fix


def test_up_refuses_an_elastic_job(tmp_path):
    with pytest.raises(UnsupportedFeature, match=r"nodes MIN:MAX: it starts a fixed set of containers") as err:
        plan_local(spec_from_dict({"nodes": "1:3"}), cwd=tmp_path)
    assert "--max-restarts" in err.value.fix
    p = subprocess.run([DDPCTL, "up", "--nodes", "1:3", "--dry-run"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") <= 2 and "Traceback" not in p.stderr, p.stderr


def test_elastic_pytorchjob_pods_rendezvous_at_worker_0_and_restart_on_retryable_codes():
    job = yaml.safe_load(_one("pytorchjob", {"name": "el", "nodes": "1:3", "max_restarts": 3, "port": 29511}))
    spec = job["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"] and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert spec["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "rdzvId": "el",
                                     "maxRestarts": 3}
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"  # the default for such jobs
    pods = pods_for(job)
    assert [p.name for p in pods] == ["el-worker-0", "el-worker-1", "el-worker-2"]
    for p in pods:
        assert p.env["PET_NNODES"] == "1:3" and p.env["PET_RDZV_ENDPOINT"] == "el-worker-0:29511"
        assert p.env["PET_RDZV_BACKEND"] == "c10d" and p.env["PET_MAX_RESTARTS"] == "3"
        assert "MASTER_ADDR" not in p.env  # no Master: torchrun's rendezvous assigns the ranks
        assert p.argv[0] == "ddp-train-launch"  # the workers' own exit codes reach the operator
        assert p.argv[-4:] == ("--output-dir", "/checkpoints", "--resume", "auto")
    assert [after_exit(job, pods[1], c) for c in (0, 137, 143, 129, 17, 1)] == \
        ["succeeded", "recreate", "recreate", "recreate", "failed", "failed"]


def test_explicit_restart_policy_wins_and_plain_jobs_keep_onfailure():
    job = yaml.safe_load(_one("pytorchjob", {"nodes": "1:2", "kubernetes": {"restart_policy": "OnFailure"}}))
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert after_exit(job, pods_for(job)[0], 3) == "restart"
    job = yaml.safe_load(_one("pytorchjob", {"nodes": 2}))
    assert {r["restartPolicy"] for r in job["spec"]["pytorchReplicaSpecs"].values()} == {"OnFailure"}
    assert "--resume" not in job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]


def test_resume_flags_are_not_added_twice_or_to_other_commands():
    cmd = yaml.safe_load(_one("pytorchjob", {"nodes": 2, "max_restarts": 1, "command": [
        "ddp-train", "--output-dir", "/data/run", "--resume=/data/run/ckpt-00000010.pt"]}))
    c = cmd["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert c[c.index("--no-python") + 1:] == ["ddp-train", "--output-dir", "/data/run",
                                             "--resume=/data/run/ckpt-00000010.pt"]
    other = yaml.safe_load(_one("pytorchjob", {"nodes": 2, "max_restarts": 1, "command": ["python", "t.py"]}))
    c = other["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert c[-2:] == ["python", "t.py"]


def test_slurm_requeue_signal_script():
    text = _one("slurm", {"name": "rq", "nodes": "1:2", "slurm": {"time": "01:00:00", "requeue": True,
                                                                  "signal_seconds": 90}})
    for line in ("#SBATCH --nodes=1-2", "#SBATCH --requeue", "#SBATCH --signal=B:USR1@90", "trap on_usr1 USR1",
                 'scontrol requeue "$SLURM_JOB_ID"', 'srun --nodes="$SLURM_JOB_NUM_NODES"',
                 'export DDPCTL_CHECKPOINTS="${DDPCTL_CHECKPOINTS:-${SLURM_SUBMIT_DIR:-$PWD}/rq-ckpt}"'):
        assert line in text, line
    assert 'ddp-train-launch --nnodes "$SLURM_JOB_NUM_NODES"' in text
    assert '--no-python ddp-train --output-dir "$DDPCTL_CHECKPOINTS" --resume auto &' in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_slurm_container_resume_needs_a_checkpoint_volume():
    with pytest.raises(UnsupportedFeature, match="/checkpoints, which must be a shared directory"):
        render_files("slurm", spec_from_dict({"slurm": {"container": "pyxis", "requeue": True}}))
