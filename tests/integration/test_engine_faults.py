"""When the engine itself fails, on the real engine: a Docker daemon restarted during an attached job (with and
without --max-restarts), a Docker Engine that does not come back, a checkpoint directory that fills up.

The daemon that is restarted or stopped is the test's own (ownengine.py: a real dockerd in a network namespace
of its own, its own data root and socket; the CPU image streamed in once per module), never the shared one.
Each test checks the ending the user sees (one line, the exit code of docs/cli.md's table, no thread traceback)
and that nothing is left behind. A second Docker host stopped mid-job is in test_two_hosts_faults.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from attached import Up, no_traceback
from itest_helpers import ddpctl, missing_part
from ownengine import OwnEngine

WAIT = "30"  # DDPCTL_ENGINE_WAIT for these tests: a restart takes a few seconds here
TRAIN = ["ddp-train", "--epochs", "1", "--checkpoint-every", "2"]


@pytest.fixture(scope="module")
def own(engine, cpu_image):
    problem = None
    if os.geteuid() != 0:
        problem = "not root (a network namespace and a dockerd need root)"
    elif not (shutil.which("dockerd") or os.path.exists("/usr/sbin/dockerd")):
        problem = "no dockerd binary"
    elif not (shutil.which("ip") and shutil.which("nsenter")):
        problem = "no 'ip' (iproute2) or 'nsenter' (util-linux)"
    if problem:
        missing_part(f"no engine of the test's own: {problem}")
    eng = OwnEngine()
    try:
        t0 = time.monotonic()
        eng.start()
        how = eng.load_image(cpu_image)
        eng.image = cpu_image
        print(f"own dockerd up and {cpu_image} {how} in {time.monotonic() - t0:.1f} s")
        yield eng
    finally:
        eng.close()


@pytest.fixture
def job(own):
    name = f"ef{uuid.uuid4().hex[:8]}"
    yield name
    ddpctl("down", name, env=own.env(), timeout=120)
    assert own.labelled(name) == {"containers": [], "networks": [], "volumes": []}


def test_daemon_restart_with_max_restarts_restarts_the_job_from_its_checkpoint(own, job):
    up = Up(["--name", job, "--image", own.image, "--nodes", "2", "--max-restarts", "2", "--", *TRAIN], own.env(DDPCTL_ENGINE_WAIT=WAIT))
    up.wait_step(6)
    at = up.step()
    t0 = time.monotonic()
    away = own.restart()
    code = up.finish()
    resumed = up.first_step_after_resume(t0)
    recovery = f"{resumed - t0:.1f} s" if resumed else "?"
    print(f"daemon away {away:.1f} s at step {at}; restart to the next training step {recovery}; ddpctl up ended in "
          f"{time.monotonic() - up.t0:.1f} s")
    assert code == 0, up.out()
    no_traceback(up)
    err = up.err
    # seen through a broken stream, a missed ping or its event stream: said at once or when it is back
    assert re.search(rf"the Docker Engine at {re.escape(own.url)} (went away \(.*\) and )?answers again after "
                     r"[\d.]+ s", err), err
    assert re.search(rf"restart 1/2: the Docker Engine at {re.escape(own.url)} went away for [\d.]+ s and stopped "
                     r"the nodes \(node \d .*exited with code 1(37|43)", err), err
    assert "ddp-train: resumed from /checkpoints/ckpt-" in "\n".join(up.lines)
    assert any('"event": "summary"' in ln for ln in up.lines)
    assert f"job {job} finished after 1 restart(s)" in err


def test_daemon_restart_without_restarts_ends_with_69_the_step_and_the_command(own, job):
    up = Up(["--name", job, "--image", own.image, "--nodes", "2", "--", *TRAIN], own.env(DDPCTL_ENGINE_WAIT=WAIT))
    up.wait_step(4)
    t0 = time.monotonic()
    away = own.restart()
    code = up.finish()
    print(f"daemon away {away:.1f} s; ddpctl up ended {time.monotonic() - t0:.1f} s after the restart began")
    assert code == 69, up.out()
    no_traceback(up)
    last = up.err.strip().splitlines()[-1]
    assert re.match(rf"error: job {job} stopped at step \d+: the Docker Engine at {re.escape(own.url)} went away for "
                    r"[\d.]+ s and stopped its nodes \(node \d", last), last
    assert last.endswith(f"no checkpoints are kept without --max-restarts: run it again with: ddpctl up --name {job} "
                         f"--image {own.image} --nodes 2 -- {' '.join(TRAIN)}"), last


def test_an_engine_that_does_not_come_back_ends_the_job_in_bounded_time(own, job):
    up = Up(["--name", job, "--image", own.image, "--nodes", "2", "--max-restarts", "2", "--", *TRAIN], own.env(DDPCTL_ENGINE_WAIT="4"))
    up.wait_step(2)
    t0 = time.monotonic()
    try:
        own.stop_daemon()
        code = up.finish(timeout=120)
        took = time.monotonic() - t0
    finally:
        own.start_daemon()
    print(f"ddpctl up ended {took:.1f} s after the daemon was stopped")
    assert code == 69, up.out()
    no_traceback(up)
    last = up.err.strip().splitlines()[-1]
    assert "went away (" in last and "did not come back within 4 s" in last, last
    assert f"when it is back, 'ddpctl down {job}' removes what is left there, or resume it from its last checkpoint " \
           f"with: ddpctl up --resume --name {job}" in last, last
    # the daemon is back: the job's containers and its checkpoint volume are still there, and --resume goes on
    assert own.labelled(job)["volumes"] == [f"{job}-ckpt"]
    again = ddpctl("up", "--resume", "--name", job, "--image", own.image, "--nodes", "2", "--max-restarts", "2", "--", *TRAIN,
                   env=own.env(), timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ddp-train: resumed from /checkpoints/ckpt-" in again.stdout


@pytest.fixture
def tiny_dir(tmp_path):
    """A 320 KiB tmpfs: room for one checkpoint of the toy model (about 210 KiB) and not for a second."""
    if os.geteuid() != 0:
        missing_part("mounting a tmpfs needs root")
    d = tmp_path / "ckpt"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "ddpctl-test-tiny", str(d)], check=True)
    yield d
    subprocess.run(["umount", str(d)], check=False)


def test_a_full_checkpoint_directory_fails_in_one_line_and_keeps_the_previous_checkpoint(engine, cpu_image, job_name,
                                                                                        tiny_dir):
    res = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--max-restarts", "2",
                 "-v", f"{tiny_dir}:/checkpoints", "--", *TRAIN, timeout=300)
    try:
        assert res.returncode == 7, res.stderr[-3000:]
        assert "Traceback" not in res.stderr
        last = res.stderr.strip().splitlines()[-1]
        assert re.match(rf"error: node 0 \({job_name}-node-0\) of job {job_name} failed: rank 0 exited with code 7: "
                        r"ddp-train: error: cannot write a checkpoint to /checkpoints: No space left on device "
                        r"\([\d.]+ KiB free, this checkpoint needs [\d.]+ KiB\); the previous checkpoint "
                        r"ckpt-0000000\d\.pt is intact;", last), last
        assert "(a permanent exit code, below 128: not restarted)" in last and "restart 1/" not in res.stderr
        names = sorted(n for n in os.listdir(tiny_dir) if n != "metrics.jsonl")
        assert len(names) == 2 and names[0].endswith(".pt") and names[1] == names[0] + ".json", names  # no temp file
        from ddp_train.checkpoint import (
            storage as checkpoint,  # the same module as in the image; validate() reads the two files
        )

        assert checkpoint.validate(str(tiny_dir / names[0])) is None
    finally:
        ddpctl("down", job_name, timeout=120)
