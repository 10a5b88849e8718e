"""CPU threads inside real containers: what `ddpctl up` sets, and ddp-train's run-time rule under a cgroup
CPU quota (the PyTorchJob/TrainJob/compose case with DDP_TRAIN_THREADS=auto)."""

from __future__ import annotations

import json
import os

import pytest

from itest_helpers import ddpctl

PROBE = "import os, torch; print('THREADS', os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads())"


def _probe_lines(stdout: str) -> list[list[str]]:
    return [line.split("| ", 1)[1].split()[1:] for line in stdout.splitlines() if "| THREADS" in line]


def test_up_gives_each_process_its_share_of_the_host(engine, cpu_image, job_name):
    want = str(max(1, (os.cpu_count() or 1) // 2))  # 2 nodes, 1 process each, on this host's CPUs
    proc = ddpctl("up", "--nodes", "2", "--name", job_name, "--image", cpu_image, "--rm", "--",
                  "python", "-c", PROBE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _probe_lines(proc.stdout) == [[want, want], [want, want]]


def test_up_keeps_the_users_value(engine, cpu_image, job_name):
    proc = ddpctl("up", "--nodes", "1", "--nproc-per-node", "2", "--name", job_name, "--image", cpu_image,
                  "--rm", "-e", "OMP_NUM_THREADS=3", "--", "python", "-c", PROBE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # torch caps a default taken from the env at the cores it sees; ddp-train's set_num_threads does not
    torch_threads = str(min(3, len(os.sched_getaffinity(0))))
    assert _probe_lines(proc.stdout) == [["3", torch_threads], ["3", torch_threads]]


def test_ddp_train_reports_the_threads_it_trained_with(engine, cpu_image, job_name):
    want = max(1, (os.cpu_count() or 1) // 2)
    proc = ddpctl("up", "--nodes", "2", "--name", job_name, "--image", cpu_image, "--rm", "--",
                  "ddp-train", "--max-steps", "3", "--no-eval", "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(next(line.split("| ", 1)[1] for line in proc.stdout.splitlines() if '"summary"' in line))
    assert summary["threads"] == want and summary["sync_check"] == "pass"


@pytest.mark.parametrize("nano_cpus, local_procs, nodes_per_host", [(1_500_000_000, 1, 1), (None, 2, 1),
                                                                    (None, 1, 2)])
def test_run_time_rule_reads_the_cgroup_quota(engine, cpu_image, nano_cpus, local_procs, nodes_per_host):
    affinity = len(os.sched_getaffinity(0))
    cpus = min(affinity, nano_cpus / 1e9) if nano_cpus else affinity
    want = max(1, int(cpus) // (local_procs * nodes_per_host))
    code = ("import torch\nfrom ddp_train.runtime import threads\nn = threads.apply()\n"
            "import os\nprint(n, os.environ['OMP_NUM_THREADS'], torch.get_num_threads())")
    env = {"DDP_TRAIN_THREADS": "auto", "OMP_NUM_THREADS": "1",  # 1: what torchrun sets for several processes
           "LOCAL_WORLD_SIZE": str(local_procs), "DDP_TRAIN_NODES_PER_HOST": str(nodes_per_host)}
    out = engine.containers.run(cpu_image, ["python", "-c", code], environment=env, nano_cpus=nano_cpus,
                                remove=True, stdout=True, stderr=False)
    assert out.decode().split() == [str(want)] * 3
