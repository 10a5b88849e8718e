"""CLI layer of image/up/ps/logs/down that needs no engine: help, dry-run, usage errors, lazy imports."""

import os
import subprocess
import sys

import pytest
import yaml

from ddpctl.local.plan import plan_local
from ddpctl.spec import spec_from_dict


def run(*args, env=None):
    code = "import sys\nfrom ddpctl.cli.main import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("cmd", [["up"], ["ps"], ["logs"], ["down"], ["image", "build"], ["image", "base"],
                                 ["image", "check"]])
def test_help_has_an_example(cmd):
    proc = run(*cmd, "--help")
    assert proc.returncode == 0 and "Example" in proc.stdout


def test_dry_run_prints_the_plan_and_imports_neither_docker_nor_torch(tmp_path):
    code = ("import sys\nfrom ddpctl.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nprint('MODULES', 'docker' in sys.modules, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, "up", "--dry-run", "--name", "dry", "--nodes", "2",
                           "--nproc-per-node", "2", "--workdir", ".", "--", "python", "t.py"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text, _, modules = proc.stdout.rpartition("MODULES")
    assert modules.split() == ["False", "False"]
    printed = yaml.safe_load(text)
    spec = spec_from_dict({"name": "dry", "nodes": 2, "nproc_per_node": 2, "workdir": ".",
                           "command": ["python", "t.py"]})
    # with a bind mount the containers run as the caller (files written to it are the caller's)
    assert printed == plan_local(spec, cwd=tmp_path, default_user=f"{os.getuid()}:{os.getgid()}",
                                 host_cpus=os.cpu_count()).to_dict()
    assert printed["containers"][0]["user"] == f"{os.getuid()}:{os.getgid()}"


def test_a_bad_engine_wait_is_refused_before_anything_starts(tmp_path):
    proc = run("up", "--nodes", "2", env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
                                         "DDPCTL_ENGINE_WAIT": "soon"})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "error: DDPCTL_ENGINE_WAIT='soon' is not a number of seconds from 0 to 86400" in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["down"], "give a job name or --all"),
    (["down", "x", "--all"], "give a job name or --all"),
    (["logs", "x", "--since", "yesterday"], "--since 'yesterday'"),
    (["logs", "x", "--tail", "-3"], "--tail must be a whole number from 0 to 10,000,000, got -3"),
    (["logs", "x", "--node", "-1"], "--node must be a whole number from 0 to 100,000, got -1"),
    (["logs", "x", "--node", "one"], "'one' is not a valid integer; see 'ddpctl logs --help'"),
    (["up", "--nodes", "0", "--dry-run"], "'nodes'"),
    (["up", "--resume", "--nodes", "2"], "--resume continues job ddp from its checkpoints, which only a job with "
                                         "--max-restarts keeps"),
    # pip's options and --requirements without --bake would be ignored (the --workdir is mounted): refused
    (["up", "--wheelhouse", ".", "--dry-run"], "--wheelhouse only applies to a workspace image, built with --bake"),
    (["up", "--workdir", ".", "--requirements", "r.txt", "--dry-run"], "--requirements only applies"),
    (["image", "build", "--cpu", "--ca-file", "x.pem"], "--ca-file only applies"),
    (["image", "check", ""], "IMAGE '' is not an image reference"),
    (["image", "build", "--base", ""], "--base '' is not an image reference"),
    (["image", "build", "--tag", "a b"], "--tag 'a b' is not an image reference"),
    (["image", "base", "--mirror", "deb.debian.org"], "--mirror 'deb.debian.org' is not an http(s)://"),
])
def test_usage_errors_are_one_line_exit_2(args, needle, tmp_path):
    # bad input is refused before the engine is asked: a Docker Engine that cannot be reached changes nothing
    proc = run(*args, env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_up_refuses_a_multi_host_spec(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: mh\nnodes: 2\nnetwork: host\nhosts: [10.0.0.1, 10.0.0.2]\n")
    proc = run("up", "-f", str(job), "--dry-run")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "ddpctl up does not support hosts" in proc.stderr and "render compose" in proc.stderr
