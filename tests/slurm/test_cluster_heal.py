"""The test cluster's own repair (tests/support/cluster.py ``heal`` and ``cancel_all``, used around every Slurm
test by conftest.py): after one slurmd dies (as Debian's slurmd once aborted here mid-suite) and a job is left
in the queue, the next test still gets two idle nodes, and a two-node job runs to its end on them. Real
daemons: the slurmd is killed with SIGKILL."""

from __future__ import annotations

import signal
import subprocess


def test_a_dead_slurmd_and_a_left_job_are_repaired_before_the_next_test(slurm_cluster, tmp_path):
    c = slurm_cluster
    script = tmp_path / "left.sbatch"
    script.write_text("#!/bin/sh\n#SBATCH --nodes=2\n#SBATCH --time=10\nsleep 300\n")
    left = subprocess.run(["sbatch", "--parsable", str(script)], env=c.env(), capture_output=True, text=True,
                          timeout=30, cwd=tmp_path)
    assert left.returncode == 0, left.stderr
    c.procs["slurmd-n1"].send_signal(signal.SIGKILL)
    c.procs["slurmd-n1"].wait(timeout=30)

    assert c.heal() == ["slurmd-n1"]
    assert c.heal() == []  # nothing left to repair
    assert c._run("squeue", "-h", "-o", "%i").stdout.strip() == ""  # the left job went with the repair
    done = tmp_path / "done.sbatch"
    done.write_text("#!/bin/sh\n#SBATCH --nodes=2\n#SBATCH --time=5\n#SBATCH --output=done.out\nsrun --nodes=2 --ntasks=2 hostname\n")
    run = subprocess.run(["sbatch", "--parsable", "--wait", str(done)], env=c.env(), capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr + c.logs()
    assert len((tmp_path / "done.out").read_text().split()) == 2, c.logs()
