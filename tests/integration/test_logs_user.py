"""Readable output and files the user owns, on the real Docker Engine with the CPU image (gloo).

- every output line of every rank is whole and prefixed ``node-N rank-R | `` (global rank), in the attached
  output of ``ddpctl up`` and in ``ddpctl logs``; ranks that printed nothing are named in one line;
- a rank that fails ends the job with one line naming node, rank, exit code and its last error line, and no
  launcher traceback anywhere in the output;
- ``ddpctl up ... | head`` stops and removes the job when head exits (a real shell pipeline);
- containers run as the caller's uid:gid: checkpoints ddp-train writes through ``--workdir`` can be removed by
  the (non-root) caller afterwards, while ``--user root`` gives files that caller cannot remove.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from itest_helpers import DDPCTL, ddpctl, labelled, missing_part

LINE = re.compile(r"^node-(\d+)(?: rank-(\d+))? *\| (.*)$")

PIECES = r"""
import os, sys, time, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
if r != 1:  # rank 1 prints nothing
    for i in range(8):
        os.write(1, f"line {i} of rank {r}: ".encode())
        time.sleep(0.03)
        os.write(1, f"end {i}\n".encode())
dist.barrier()
dist.destroy_process_group()
"""

FAIL_ON_3 = r"""
import time, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
print(f"hello from {r}", flush=True)
if r == 3:
    time.sleep(0.5)
    raise ValueError("boom on rank 3")
dist.barrier()
"""

SLEEPER = """
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
os.write(1, b"READY\\n")
while True:
    time.sleep(0.5)
"""


def _parse(stdout: str) -> list[tuple[int, int | None, str]]:
    out = []
    for line in stdout.splitlines():
        m = LINE.match(line)
        assert m, f"line without a node prefix: {line!r}"
        out.append((int(m.group(1)), None if m.group(2) is None else int(m.group(2)), m.group(3)))
    return out


def test_every_rank_line_is_whole_and_prefixed_in_up_and_logs(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "pieces.py").write_text(PIECES)
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--nproc-per-node", "2",
                  "--workdir", ".", "--", "python", "pieces.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got: dict[int, list[int]] = {}
    for node, rank, text in _parse(proc.stdout):
        if rank is None:
            continue  # the node's launcher
        assert node == rank // 2, (node, rank, text)  # global ranks: node 1 runs ranks 2 and 3
        m = re.fullmatch(r"line (\d+) of rank (\d+): end (\d+)", text)
        assert m and int(m.group(2)) == rank and m.group(1) == m.group(3), f"torn or mixed line: {text!r}"
        got.setdefault(rank, []).append(int(m.group(1)))
    assert {r: sorted(v) for r, v in got.items()} == {0: list(range(8)), 2: list(range(8)), 3: list(range(8))}

    node1 = ddpctl("logs", job_name, "--node", "1", check=True)
    lines = _parse(node1.stdout)
    assert {(n, r) for n, r, _ in lines if r is not None} == {(1, 2), (1, 3)}
    assert all(n == 1 for n, _, _ in lines)
    assert "printed nothing" not in node1.stderr
    node0 = ddpctl("logs", job_name, "--node", "0", check=True)
    assert node0.stderr.strip().splitlines() == ["node-0: rank-1 printed nothing"]


def test_a_failing_rank_ends_the_job_with_one_root_cause_line(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "fail.py").write_text(FAIL_ON_3)
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--nproc-per-node", "2",
                  "--workdir", ".", "--", "python", "fail.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: node 1 ({job_name}-node-1) of job {job_name} failed: rank 3 exited with code 1: "
                           "ValueError: boom on rank 3; see "), last
    launcher_lines = [text for _, rank, text in _parse(proc.stdout) if rank is None]
    joined = "\n".join(launcher_lines + proc.stderr.splitlines())
    for spam in ("Traceback", "ChildFailedError", "failed (exitcode", "torch.distributed.elastic.multiprocessing.errors"):
        assert spam not in joined, joined[-3000:]
    assert "ddp-train-launch: rank 3 failed (exit code 1): ValueError: boom on rank 3" in launcher_lines
    # the worker's own traceback is still there, on its rank's lines
    assert (1, 3, "ValueError: boom on rank 3") in _parse(proc.stdout)


PEER_FIRST = r"""
import os, sys, time
r = int(os.environ["RANK"])
if r < 2:  # node 0 fails at once, the way a rank that lost its peer does
    print("RuntimeError: [pair.cc:553] Connection closed by peer [10.0.0.2]:1", file=sys.stderr, flush=True)
    sys.exit(1)
if r == 2:  # node 1 fails a moment later with the real cause
    time.sleep(1.5)
    raise ValueError("the real cause on rank 2")
time.sleep(60)
"""


def test_the_root_cause_is_named_even_when_a_node_that_lost_its_peer_exits_first(engine, cpu_image, job_name,
                                                                                   tmp_path):
    (tmp_path / "peer.py").write_text(PEER_FIRST)
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--nproc-per-node", "2",
                  "--workdir", ".", "--", "python", "peer.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: node 1 ({job_name}-node-1) of job {job_name} failed: rank 2 exited with code 1: "
                           "ValueError: the real cause on rank 2; "), (last, proc.stdout[-3000:])


def test_closing_stdout_stops_and_removes_the_job(engine, cpu_image, job_name, tmp_path):
    """A real shell pipeline: `ddpctl up ... | head -n 2` with a job that would run forever."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    script = (f"set -o pipefail; '{DDPCTL}' up --name {job_name} --image {cpu_image} --nodes 2 --workdir . "
              f"-- python sleeper.py 2>'{tmp_path}/up.err' | head -n 2; echo \"status ${{PIPESTATUS[0]}}\"")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, NO_COLOR="1"))
    err = (tmp_path / "up.err").read_text()
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and all(ln.startswith("node-") for ln in lines[:2]), (proc.stdout, err)
    assert lines[2] == "status 141", (proc.stdout, err)
    assert f"stdout closed: stopping job {job_name}" in err and f"job {job_name} stopped and removed" in err, err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert labelled(engine, job_name) == ([], [])


# ----------------------------------------------------------------------------------------- file owners


def _non_root_runner(sock_gid: int) -> tuple[list[str], int, int]:
    """A command prefix that runs as a non-root user who can reach the Docker socket.

    Root here (CI): the user ``ddpctl-itest`` (created with useradd when missing) through ``setpriv``, with
    the socket's group as its supplementary group, which is what membership of the ``docker`` group gives a
    real user. Not root: the caller itself, who already reaches the engine.
    """
    if os.geteuid() != 0:
        return [], os.getuid(), os.getgid()
    name = "ddpctl-itest"
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
    uid = int(subprocess.run(["id", "-u", name], capture_output=True, text=True, check=True).stdout)
    gid = int(subprocess.run(["id", "-g", name], capture_output=True, text=True, check=True).stdout)
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", f"--groups={sock_gid}", "--"], uid, gid


def _ddpctl_as(runner: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """How the non-root user starts this checkout's ddpctl: the venv's own script, or, when the venv's interpreter
    lives where that user cannot enter (pyenv under root's 0700 home, as on the CI machine), the same code (the
    venv's site-packages and src/) run by the system python3 of the same version."""
    if not runner or subprocess.run([*runner, DDPCTL, "--version"], capture_output=True, env=env).returncode == 0:
        return [DDPCTL], env
    import sysconfig

    system = "/usr/bin/python3"
    same = subprocess.run([system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same.returncode != 0 or same.stdout.strip() != str(tuple(sys.version_info[:2])):
        return [DDPCTL], env  # nothing better: the assertion below explains
    src = Path(__file__).resolve().parents[2] / "src"
    path = os.pathsep.join([str(src), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    return [system, "-m", "ddpctl"], dict(env, PYTHONPATH=path, PYTHONNOUSERSITE="1")


def test_files_written_through_workdir_belong_to_the_caller(engine, cpu_image, job_name):
    sock = "/var/run/docker.sock"
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        pytest.skip("needs the engine on a local unix socket to run ddpctl as another user")
    sock = host[len("unix://"):] if host else sock
    runner, uid, gid = _non_root_runner(os.stat(sock).st_gid)
    work = Path(tempfile.mkdtemp(prefix="ddpctl-owner-"))  # not under pytest's root-only tmp dir
    try:
        os.chown(work, uid, gid)
        env = dict(os.environ, NO_COLOR="1", HOME=str(work))
        cli, env = _ddpctl_as(runner, env)

        def as_user(*cmd: str, timeout: int = 400) -> subprocess.CompletedProcess:
            return subprocess.run([*runner, *cmd], cwd=work, capture_output=True, text=True, env=env,
                                  timeout=timeout)

        reach = as_user(*cli, "--version")
        assert reach.returncode == 0, (f"uid {uid} cannot run {cli} ({reach.stderr.strip()[-300:]}): every "
                                       "directory above the checkout must be world-traversable (chmod o+x)")

        up = as_user(*cli, "up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--workdir", ".", "--",
                     "ddp-train", "--workload", "toy", "--train-size", "256", "--test-size", "64", "--batch-size",
                     "32", "--epochs", "1", "--output-dir", "ckpt/run1", "--checkpoint-every", "4")
        assert up.returncode == 0, up.stderr[-3000:]
        files = [p for p in (work / "ckpt").rglob("*")]
        assert any(p.name.startswith("ckpt-") for p in files), files
        assert all((p.stat().st_uid, p.stat().st_gid) == (uid, gid) for p in files), \
            [(str(p), p.stat().st_uid, p.stat().st_gid) for p in files]
        rm = as_user("rm", "-r", str(work / "ckpt"))
        assert rm.returncode == 0 and not (work / "ckpt").exists(), rm.stderr

        if runner:  # the same caller cannot remove what a root container wrote: what the default prevents
            ddpctl("down", job_name)
            root = as_user(*cli, "up", "--name", job_name, "--image", cpu_image, "--user", "root", "--workdir", ".",
                           "--", "python", "-c", "import os; os.makedirs('byroot/sub'); open('byroot/sub/f', 'w')")
            assert root.returncode == 0, root.stderr[-2000:]
            assert (work / "byroot" / "sub" / "f").stat().st_uid == 0
            assert as_user("rm", "-r", str(work / "byroot")).returncode != 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_an_image_without_the_launcher_is_one_line_and_leaves_nothing(engine, cpu_image, job_name):
    # Debian + Python without ddp-train: what `make image-cpu` starts from
    from ddpctl.images import DEFAULT_LOCAL_BASE

    try:
        engine.images.get(DEFAULT_LOCAL_BASE)
    except Exception:  # noqa: BLE001
        # `make test` builds it (make image-cpu); only a hand-run without it may skip
        missing_part(
            f"{DEFAULT_LOCAL_BASE} is not on this engine (make image-cpu builds it)")
    proc = ddpctl("up", "--name", job_name, "--image", DEFAULT_LOCAL_BASE, "--nodes", "2", "-d")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and lines[-1].startswith(
        f"error: image {DEFAULT_LOCAL_BASE} has no 'ddp-train-launch'"), proc.stderr
    assert "--base" in lines[-1] and "Traceback" not in proc.stderr
    assert labelled(engine, job_name) == ([], [])
