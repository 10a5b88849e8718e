"""The rendered sbatch script on a real Slurm cluster (munged + slurmctld + two slurmd on this machine).

Real: Slurm (sbatch, srun, scontrol, scancel and the daemons), bash, torchrun with its c10d rendezvous,
ddp-train and gloo process groups. The nodes n1 and n2 are two slurmd daemons on one machine
(NodeAddr=127.0.0.1), so "two hosts" share one kernel; nothing else is a stand-in.

How the job finds torchrun and ddp-train (``--container none``): sbatch passes the submitter's environment
to the job (``--export=ALL``, Slurm's default), so the venv's bin directory on the submitter's PATH is on
the job's PATH too. On a real cluster that directory must exist on every node (a shared file system).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ports import free_port

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
VENV_BIN = str(Path(sys.executable).parent)


def _render(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / f"{name}.sbatch"
    proc = subprocess.run([DDPCTL, "render", "slurm", "--name", name, "-n", "2", "--port", str(free_port()),
                           "-o", str(out), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out


def _sbatch(cluster, script: Path, *opts: str, wait: bool = True, timeout: float = 300):
    env = cluster.env(PATH=f"{VENV_BIN}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    argv = ["sbatch", "--parsable", *(["--wait"] if wait else []), *opts, str(script)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=script.parent, env=env, timeout=timeout)


def _job_id(proc: subprocess.CompletedProcess) -> str:
    m = re.search(r"^(\d+)", proc.stdout.strip())
    assert m, proc.stdout + proc.stderr
    return m.group(1)


def _job_fields(cluster, job_id: str, timeout: float = 30) -> dict[str, str]:
    """The job's record from ``scontrol show job``, asked again while the controller gives none (under load it
    answered once with nothing at all, seen in CI); an assertion with scontrol's own words after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                              env=cluster.env(), timeout=30)
        fields = dict(kv.split("=", 1) for kv in proc.stdout.split() if "=" in kv)
        if "JobState" in fields:
            return fields
        assert time.monotonic() < deadline, f"scontrol show job {job_id}: {proc.stdout[-300:]}{proc.stderr[-300:]}"
        time.sleep(0.5)


def _final_fields(cluster, job_id: str, timeout: float = 60) -> dict[str, str]:
    """The job's record once it has left COMPLETING (sbatch --wait returns when the job ends, which can be
    while slurmd still reaps the steps' processes)."""
    deadline = time.monotonic() + timeout
    while True:
        fields = _job_fields(cluster, job_id)
        if "COMPLETING" not in fields.get("JobState", "") or time.monotonic() > deadline:
            return fields
        time.sleep(0.2)


def _store_procs(script: Path) -> list[int]:
    """Pids of the script's rendezvous store (a python3 TCPStore server on the script's port)."""
    port = re.search(r'--rdzv-endpoint "\$MASTER_ADDR:(\d+)"', script.read_text()).group(1).encode()
    out = []
    for pid in _procs_with("TCPStore"):
        try:
            if port in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                out.append(pid)
        except OSError:
            continue
    return out


def _procs_with(token: str) -> list[int]:
    """Pids of this machine's processes whose command line contains ``token``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if token.encode() in (d / "cmdline").read_bytes():
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


RANKINFO = 'echo "RANKINFO $RANK $WORLD_SIZE $LOCAL_RANK $SLURM_NODEID"; exec ddp-train --max-steps 4 --no-eval'


def test_rendered_script_2_nodes_x_2_procs_completes_with_ranks_0_to_3_and_sync_check(slurm_cluster, tmp_path):
    script = _render(tmp_path, "rdzv", "--nproc-per-node", "2", "--", "sh", "-c", RANKINFO)
    t0 = time.monotonic()
    proc = _sbatch(slurm_cluster, script)
    wall = time.monotonic() - t0
    job = _job_id(proc)
    log = (tmp_path / f"rdzv-{job}.out").read_text()
    assert proc.returncode == 0, proc.stderr + log
    fields = _final_fields(slurm_cluster, job)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", fields
    assert fields["NodeList"] == "n[1-2]"

    infos = [line.split()[1:] for line in log.splitlines() if line.startswith("RANKINFO ")]
    assert sorted(int(i[0]) for i in infos) == [0, 1, 2, 3], log
    assert {i[1] for i in infos} == {"4"}
    assert sorted((i[3], i[2]) for i in infos) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    assert _store_procs(script) == [], "the rendezvous store outlived the job"
    summary = json.loads([x for x in log.splitlines() if x.startswith('{"event": "summary"')][-1])
    assert summary["world_size"] == 4 and summary["sync_check"] == "pass" and summary["exit_code"] == 0
    # The rendezvous store outlives every torchrun, so no node prints connection errors or tracebacks at
    # the end (a torchrun-hosted store did: docs/several-hosts.md).
    for message in ("Traceback", "TCPStore.cpp", "failed to shutdown the rendezvous", "exit barrier",
                    "keep-alive heartbeat"):
        assert message not in log, log
    assert not [x for x in log.splitlines() if x.startswith(("W1", "E1", "["))], log  # no torch warnings
    print(f"sbatch --wait 2x2 ddp-train: {wall:.1f} s")


def test_failing_job_exit_code_reaches_sbatch_wait(slurm_cluster, tmp_path):
    # Rank 3 fails with 3; torchrun on that node exits 1 (its own code for any worker failure), srun
    # passes the highest task code on, and sbatch --wait exits with the job's code.
    script = _render(tmp_path, "fails", "--nproc-per-node", "2", "--", "sh", "-c",
                     'if [ "$RANK" = 3 ]; then echo "rank 3 fails"; exit 3; fi; sleep 1')
    proc = _sbatch(slurm_cluster, script)
    job = _job_id(proc)
    log = (tmp_path / f"fails-{job}.out").read_text()
    fields = _final_fields(slurm_cluster, job)
    assert fields["JobState"] == "FAILED", fields
    code = int(fields["ExitCode"].split(":")[0])
    assert code != 0 and proc.returncode == code, (proc.returncode, fields, log)
    assert "rank 3 fails" in log
    assert re.search(r"exitcode\s*:\s*3", log), log  # torchrun names the root cause


SLEEPER = "import sys, time\nprint('SLEEPING', flush=True)\ntime.sleep(600)\n"


def test_scancel_ends_a_running_job_and_leaves_no_processes(slurm_cluster, tmp_path):
    token = f"ddpctl-scancel-{uuid.uuid4().hex[:8]}"
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    script = _render(tmp_path, "cancel", "--nproc-per-node", "2", "--workdir", str(tmp_path), "--",
                     "python", "sleeper.py", token)
    job = _job_id(_sbatch(slurm_cluster, script, wait=False, timeout=60))
    deadline = time.monotonic() + 120
    while len(_procs_with(token)) < 4 and time.monotonic() < deadline:  # 2 nodes x 2 workers
        time.sleep(0.5)
    assert len(_procs_with(token)) >= 4, _job_fields(slurm_cluster, job)
    assert _job_fields(slurm_cluster, job)["JobState"] == "RUNNING"

    subprocess.run(["scancel", job], check=True, env=slurm_cluster.env(), timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = _job_fields(slurm_cluster, job)["JobState"]
        if state == "CANCELLED" and not _procs_with(token) and not _procs_with(f"--rdzv-id {job}"):
            break
        time.sleep(0.5)
    assert _job_fields(slurm_cluster, job)["JobState"] == "CANCELLED"
    assert _procs_with(token) == [], "training processes survived scancel"
    assert _store_procs(script) == [], "the rendezvous store survived scancel"
