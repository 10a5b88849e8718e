"""``ddp-train-launch`` passes the failing worker's exit code on (plain torchrun exits 1), so Kubernetes
``restartPolicy: ExitCode`` sees >= 128 for retryable failures. Real torchrun agents and worker processes."""

import subprocess
import sys

import pytest

from ddp_train.launcher.run import failure_exit_code

pytestmark = pytest.mark.distributed

# rank 1 ends the way the test says; rank 0 waits so that rank 1's failure is the root cause
WORKER = ("import os, signal, sys, time\n"
          "how = sys.argv[1]\n"
          "if os.environ['RANK'] != '1':\n"
          "    time.sleep(0 if how == 'ok' else 30)\n"
          "elif how == 'kill':\n"
          "    os.kill(os.getpid(), signal.SIGKILL)\n"
          "elif how != 'ok':\n"
          "    sys.exit(int(how))\n")


def launch(module: str, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, "--standalone", "--nproc-per-node", "2", "--no-python",
                           sys.executable, "-c", WORKER, how], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how, code", [("ok", 0), ("3", 3), ("129", 129), ("kill", 137)])
def test_worker_exit_code_reaches_the_container(how, code):
    proc = launch("ddp_train.launcher.run", how)
    assert proc.returncode == code, proc.stderr[-2000:]
    if code:
        assert proc.stderr.splitlines()[-1].startswith(f"ddp-train-launch: rank 1 failed (exit code {code}")


def test_plain_torchrun_hides_it():
    # why the wrapper exists: torchrun reports any worker failure as 1
    assert launch("torch.distributed.run", "129").returncode == 1


def test_failure_exit_code():
    assert failure_exit_code(-9) == 137 and failure_exit_code(-15) == 143
    assert failure_exit_code(4) == 4 and failure_exit_code(0) == 1
