"""Hostile input through the command line: malformed, oversized and malicious specs, flags and values.

Each bad input must end with exit code 2, exactly one line on stderr (``error: ...``, naming the problem and
the fix), nothing on stdout and no traceback. Most cases run ``ddpctl.cli.main.main`` in this process (the
same entry point as the console script, much faster on a 2-core machine); the cases that are about time,
memory or the process itself run the real console script in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ddpctl.cli.main import main

DDPCTL = str(Path(sys.executable).parent / "ddpctl")


def cli(capsys, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run ``ddpctl ARGS`` in-process; returns (exit code, stdout, stderr)."""
    old = os.getcwd()
    env_debug = os.environ.pop("DDPCTL_DEBUG", None)
    try:
        if cwd is not None:
            os.chdir(cwd)
        with pytest.raises(SystemExit) as exc:
            main(list(args))
    finally:
        os.chdir(old)
        if env_debug is not None:
            os.environ["DDPCTL_DEBUG"] = env_debug
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def assert_one_line_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2, (code, err)
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()  # str.splitlines also splits on U+0085, U+2028, \r, \x0b ...
    assert len(lines) == 1 and err.endswith("\n") and lines[0].startswith("error: "), repr(err)
    assert needle in lines[0], lines[0]


def spec_file(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


# (id, args; "@TEXT" is replaced by a spec file holding TEXT, needle in the error line)
CASES = [
    # -- shell injection in the sbatch script (critical): a newline in an env NAME
    ("env-name-newline-flag", ["slurm", "-e", "X\n=/x"], "not a valid environment variable name"),
    ("env-name-newline-file", ["slurm", "-f", '@env: {"X\\n": "/x"}\n'], "not a valid environment variable name"),
    ("env-name-newline-list", ["slurm", "-f", '@env: ["X\\n=/x"]\n'], "not a valid environment variable name"),
    # -- topology overrides
    ("command-starts-with-dash", ["compose", "--", "--node-rank=5", "python", "t.py"], "--nodes"),
    ("command-dash-pytorchjob", ["pytorchjob", "--", "--nnodes=9", "python", "t.py"], "own option"),
    ("env-slurm-nodes", ["slurm", "-e", "SLURM_JOB_NUM_NODES=1"], "use --nodes"),
    ("env-master-addr", ["compose", "-e", "MASTER_ADDR=10.9.9.9"], "master_addr"),
    ("env-master-port", ["compose", "-e", "MASTER_PORT=1"], "use --port"),
    ("env-rank", ["pytorchjob", "-e", "RANK=3"], "--nproc-per-node"),
    ("env-world-size", ["trainjob", "-e", "WORLD_SIZE=64"], "--nproc-per-node"),
    ("env-local-rank", ["compose", "-e", "LOCAL_RANK=1"], "--nproc-per-node"),
    ("env-pet", ["pytorchjob", "-e", "PET_NNODES=7"], "--nodes"),
    ("env-pet-trainjob", ["trainjob", "-e", "PET_MASTER_PORT=1"], "reserved"),
    ("env-shellopts", ["slurm", "-e", "SHELLOPTS=xtrace"], "SHELLOPTS is reserved"),
    ("env-bashopts", ["slurm", "-e", "BASHOPTS=x"], "reserved"),
    ("env-bash-env", ["slurm", "-e", "BASH_ENV=/tmp/x"], "reserved"),
    ("env-ps4", ["slurm", "-e", "PS4=$(touch pwned)"], "reserved"),
    ("env-ifs", ["slurm", "-e", "IFS=/"], "reserved"),
    ("env-path", ["slurm", "-e", "PATH=/nowhere"], "PATH is reserved"),
    ("env-uid", ["slurm", "-e", "UID=0"], "read-only"),
    ("env-reserved-in-file", ["compose", "-f", "@env: {RANK: 1}\n"], "reserved"),
    # -- argument splitting
    ("volume-comma", ["slurm", "--container", "apptainer", "-f", "@volumes: [{source: '/a,b', target: /d}]\n"],
     "','"),
    ("volume-colon-mapping", ["compose", "-f", "@volumes: [{source: '/a:b', target: /d}]\n"], "':'"),
    ("workdir-colon", ["compose", "--workdir", "/home/u/a:b"], "':'"),
    ("workdir-comma", ["slurm", "--container", "pyxis", "--workdir", "/home/u/a,b"], "','"),
    ("container-image-dash", ["slurm", "--container", "apptainer", "--container-image=--bind=/:/host"],
     "starts with '-'"),
    ("image-dash", ["compose", "--image=-evil"], "starts with '-'"),
    ("image-uppercase", ["compose", "--image", "Team/Img:1"], "lowercase"),
    ("image-space", ["pytorchjob", "--image", "a b"], "not a valid image reference"),
    ("image-docker-uri-dash", ["slurm", "--container", "apptainer", "--container-image", "docker://-x"],
     "starts with '-'"),
    # -- invalid manifests
    ("namespace-too-long", ["pytorchjob", "--namespace", "a" * 64], "DNS-1123 label"),
    ("namespace-dot", ["trainjob", "--namespace", "a.b"], "DNS-1123 label"),
    ("service-account-too-long", ["pytorchjob", "--service-account", "s" * 254], "DNS-1123 subdomain"),
    ("scheduler-upper", ["pytorchjob", "--scheduler-name", "Volcano"], "DNS-1123 subdomain"),
    ("queue-too-long", ["pytorchjob", "--queue", "q" * 254], "DNS-1123 subdomain"),
    ("runtime-too-long", ["trainjob", "--runtime", "r" * 254], "DNS-1123 subdomain"),
    ("priority-too-long", ["pytorchjob", "-f", "@kubernetes: {priority_class: " + "p" * 254 + "}\n"], "subdomain"),
    ("kueue-label-too-long", ["trainjob", "--kueue-queue", "k" * 64], "label value"),
    ("node-selector-value", ["pytorchjob", "-f", "@kubernetes: {node_selector: {pool: 'a b'}}\n"], "label value"),
    ("node-selector-key", ["pytorchjob", "-f", "@kubernetes: {node_selector: {'bad key': a}}\n"], "label key"),
    ("toleration-operator", ["pytorchjob", "-f", "@kubernetes: {tolerations: [{key: a, operator: Bogus}]}\n"],
     "operator"),
    ("toleration-seconds-float", ["pytorchjob", "-f",
                                  "@kubernetes: {tolerations: [{key: a, effect: NoExecute, tolerationSeconds: 1.5}]}\n"],
     "integer"),
    ("toleration-seconds-text", ["trainjob", "-f",
                                 "@kubernetes: {tolerations: [{key: a, effect: NoExecute, tolerationSeconds: soon}]}\n"],
     "integer"),
    ("ttl-beyond-int32", ["pytorchjob", "-f", "@kubernetes: {ttl_seconds_after_finished: 2147483648}\n"],
     "2147483647"),
    ("two-volumes-one-target", ["compose", "-v", "/a:/data", "-v", "/b:/data"], "two sources onto /data"),
    ("volume-onto-workdir", ["compose", "--workdir", "/w", "-v", "/a:/workspace"], "two sources onto /workspace"),
    ("volume-onto-dev-shm", ["pytorchjob", "-v", "/a:/dev/shm"], "/dev/shm"),
    ("volume-named", ["compose", "-v", "data:/data"], "is a name, not a path"),
    ("hostpath-dotdot", ["pytorchjob", "-v", "/data/../etc:/x"], "'..'"),
    ("volume-target-dotdot", ["compose", "-v", "/data:/x/../etc"], "'..'"),
    # -- tracebacks instead of one line
    ("yaml-merge-key", ["compose", "-f", "@base: &b {nodes: 2}\n<<: *b\n"], "merge keys"),
    ("yaml-merge-key-nested", ["compose", "-f", "@nccl:\n  <<: {debug: INFO}\n"], "merge keys"),
    ("yaml-unknown-tag", ["compose", "-f", "@nodes: !fancy 2\n"], "!fancy"),
    ("yaml-python-tag", ["compose", "-f", "@nodes: !!python/object/apply:os.system [id]\n"], "not supported"),
    ("yaml-recursive-alias", ["compose", "-f", "@env: &a [*a]\n"], "refers to the node that contains it"),
    ("yaml-deep-nesting", ["compose", "-f", "@nodes: " + "[" * 5000 + "]" * 5000 + "\n"], "nests deeper"),
    ("yaml-5000-digit-int", ["compose", "-f", "@nodes: " + "9" * 5000 + "\n"], "too long"),
    ("flag-5000-digit-port", ["compose", "-f", "@port: '" + "9" * 5000 + "'\n"], "must be an integer"),
    ("cpus-nan", ["compose", "-f", "@cpus_per_node: .nan\n"], "finite"),
    ("cpus-inf", ["compose", "-f", "@cpus_per_node: .inf\n"], "finite"),
    ("cpus-huge", ["pytorchjob", "-f", "@cpus_per_node: 1.0e+308\n"], "at most"),
    ("cpus-huge-int", ["compose", "-f", "@cpus_per_node: " + "9" * 40 + "\n"], "at most"),
    ("memory-nan", ["compose", "-f", "@memory_per_node: .nan\n"], "memory_per_node"),
    ("memory-huge-text", ["compose", "-f", "@memory_per_node: '" + "9" * 25 + "t'\n"], "larger than"),
    ("memory-400-digits", ["compose", "-f", "@memory_per_node: '" + "9" * 400 + "g'\n"], "not understood"),
    ("shm-size-huge", ["compose", "--shm-size", "99999999999999999999t"], "larger than"),
    ("shm-size-nan", ["compose", "--shm-size", "nan"], "not understood"),
    ("shm-size-inf", ["compose", "--shm-size", "inf"], "not understood"),
    ("shm-size-400-digits", ["compose", "--shm-size", "9" * 400], "not understood"),
    # -- silent disagreement between targets
    ("device-ids-00", ["compose", "-n", "2", "-g", "1", "--device-ids", "0,00"], "lists a GPU twice"),
    ("cpus-rounds-to-zero", ["pytorchjob", "-f", "@cpus_per_node: 0.0004\n"], "0.001"),
    ("invalid-k8s-section-and-flag", ["pytorchjob", "-f", "@kubernetes: [1, 2]\n", "--namespace", "ml"],
     "must be a mapping"),
    ("invalid-slurm-section-and-flag", ["slurm", "-f", "@slurm: oops\n", "--partition", "gpu"],
     "must be a mapping"),
    ("master-addr-on-bridge", ["compose", "-f", "@master_addr: 10.0.0.9\n"], "bridge network"),
    ("nel-in-env-value", ["compose", "-e", "A=x\u0085y"], "U+0085"),
    ("nel-in-file-value", ["pytorchjob", "-f", '@env: {A: "x\\Ny"}\n'], "U+0085"),
    ("line-separator-in-command", ["compose", "--", "python", "a\u2028b"], "U+2028"),
    ("escape-in-name-of-partition", ["slurm", "--partition", "gpu\x1b[2J"], "U+001B"),
    ("nul-in-env", ["compose", "-f", '@env: {A: "x\\0y"}\n'], "U+0000"),
    ("lone-surrogate", ["compose", "-e", "A=\udcff"], "U+DCFF"),
    # -- resource exhaustion (the size of one value)
    ("env-too-many", ["compose", "-f", "@env: {" + ", ".join(f"K{i}: v" for i in range(1001)) + "}\n"],
     "more than 1000"),
]


@pytest.mark.parametrize("case, args, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, case, args, needle):
    args = [spec_file(tmp_path, a[1:]) if a.startswith("@") else a for a in args]
    code, out, err = cli(capsys, "render", *args, cwd=tmp_path)
    assert_one_line_error(code, out, err, needle)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("args, needle", [
    (["-e", "SHELLOPTS=xtrace"], "reserved"),
    (["-f", "@cpus_per_node: .inf\n"], "finite"),
    (["-f", "@memory_per_node: 1.0e+300\n"], "memory_per_node"),
    (["--workdir", "/a:b"], "':'"),
    (["-v", "x:/x"], "is a name"),
    (["--", "--node-rank=1", "python"], "own option"),
    (["--device-ids", "1,01", "-g", "1", "-n", "2"], "twice"),
])
def test_up_dry_run_refuses_the_same(capsys, tmp_path, args, needle):
    args = [spec_file(tmp_path, a[1:]) if a.startswith("@") else a for a in args]
    code, out, err = cli(capsys, "up", "--dry-run", *args, cwd=tmp_path)
    assert_one_line_error(code, out, err, needle)


# ------------------------------------------------------------------------------ the real console script


def run(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


BILLION_LAUGHS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
    "env: *i\n"
)


def test_billion_laughs_fails_fast_with_one_line(tmp_path):
    assert len(BILLION_LAUGHS.encode()) < 450  # the 445-byte class: 9^9 'lol's once expanded
    path = spec_file(tmp_path, BILLION_LAUGHS)
    start = time.monotonic()
    proc = run("render", "compose", "-f", path, cwd=tmp_path, timeout=30)
    took = time.monotonic() - start
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "aliases" in proc.stderr
    assert took < 10, took  # expanded, it takes > 60 s and 1.2 GB


def test_huge_spec_file_is_refused_before_parsing(tmp_path):
    # A 31 MB spec with 1.5 M env keys would take minutes to parse; a spec is refused above 1 MiB, unread.
    path = tmp_path / "big.yaml"
    with open(path, "w") as fh:
        fh.write("env:\n")
        for i in range(150_000):
            fh.write(f"  K{i}: v\n")
    start = time.monotonic()
    proc = run("render", "compose", "-f", str(path), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "larger than" in proc.stderr
    assert time.monotonic() - start < 10


def test_env_name_newline_does_not_reach_the_script(tmp_path):
    # On main, `-e $'X\n=/x'` rendered `export X` + a line `=/x`, which bash runs as the program ./=/x.
    (tmp_path / "=").mkdir()
    payload = tmp_path / "=" / "x"
    payload.write_text(f"#!/bin/sh\ntouch {tmp_path}/pwned\n")
    payload.chmod(0o755)
    proc = run("render", "slurm", "-e", "X\n=/x", "-o", str(tmp_path / "job.sbatch"), cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert not (tmp_path / "job.sbatch").exists() and not (tmp_path / "pwned").exists()


# -------------------------------------------------------------------------- one answer on every target


def test_relative_workdir_is_one_directory_on_every_target(capsys, tmp_path):
    """`--workdir code` was ./code for `up` but a named volume `code` in compose."""
    (tmp_path / "code").mkdir()
    want = f"{tmp_path}/code"
    code, out, _ = cli(capsys, "render", "compose", "--workdir", "code", cwd=tmp_path)
    assert code == 0
    svc = next(iter(yaml.safe_load(out)["services"].values()))
    assert svc["volumes"] == [f"{want}:/workspace"]
    code, out, _ = cli(capsys, "up", "--dry-run", "--workdir", "code", cwd=tmp_path)
    assert code == 0
    mounts = yaml.safe_load(out)["containers"][0]["mounts"]
    assert [m["source"] for m in mounts] == [want]
    code, out, _ = cli(capsys, "render", "slurm", "--container", "pyxis", "--workdir", "code", cwd=tmp_path)
    assert code == 0 and f"--container-mounts={want}:/workspace" in out


def test_relative_volume_in_a_file_is_relative_to_the_file(capsys, tmp_path):
    job_dir = tmp_path / "jobs"
    job_dir.mkdir()
    path = spec_file(job_dir, "volumes: ['./data:/data:ro', 'ckpt/run1:/ckpt']\n")
    code, out, _ = cli(capsys, "render", "compose", "-f", path, cwd=tmp_path)
    assert code == 0
    svc = next(iter(yaml.safe_load(out)["services"].values()))
    assert svc["volumes"] == [f"{job_dir}/data:/data:ro", f"{job_dir}/ckpt/run1:/ckpt"]
    code, out, _ = cli(capsys, "up", "--dry-run", "-f", path, cwd=tmp_path)
    assert [m["source"] for m in yaml.safe_load(out)["containers"][0]["mounts"]] == [
        f"{job_dir}/data", f"{job_dir}/ckpt/run1"]
    # the same relative path from a flag is relative to the current directory
    code, out, _ = cli(capsys, "render", "compose", "-f", path, "-v", "./data:/data", cwd=tmp_path)
    svc = next(iter(yaml.safe_load(out)["services"].values()))
    assert svc["volumes"] == [f"{tmp_path}/data:/data"]


def test_single_host_bridge_master_is_node_0(capsys, tmp_path):
    """Bridge network + `--hosts h1`: rank 0 listens at <job>-node-0 only, so that is the master address."""
    code, out, _ = cli(capsys, "render", "compose", "--hosts", "gpu-01", cwd=tmp_path)
    assert code == 0
    argv = yaml.safe_load(out)["services"]["ddp-node-0"]["command"]
    assert argv[argv.index("--master-addr") + 1] == "ddp-node-0"
    code, out, _ = cli(capsys, "up", "--dry-run", "-f", spec_file(tmp_path, "hosts: [gpu-01]\n"), cwd=tmp_path)
    argv = yaml.safe_load(out)["containers"][0]["command"]
    assert argv[argv.index("--master-addr") + 1] == "ddp-node-0"


def test_cpus_agree_between_targets(capsys, tmp_path):
    path = spec_file(tmp_path, "cpus_per_node: 2.0004\n")
    _, out, _ = cli(capsys, "render", "compose", "-f", path)
    assert yaml.safe_load(out)["services"]["ddp-node-0"]["cpus"] == 2.0
    _, out, _ = cli(capsys, "render", "pytorchjob", "-f", path)
    res = yaml.safe_load(out)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert res["resources"]["limits"]["cpu"] == "2"
    _, out, _ = cli(capsys, "up", "--dry-run", "-f", path)
    assert yaml.safe_load(out)["containers"][0]["nano_cpus"] == 2_000_000_000


@pytest.mark.parametrize("text, flags, needle", [
    ('env: "HF_TOKEN=x"\n', ["-e", "A=1"], "'env'"),
    ("secret_env: 7\n", ["--secret-env", "B"], "'secret_env'"),
])
def test_a_flag_never_hides_an_invalid_file_value(capsys, tmp_path, text, flags, needle):
    # the file's env / secret_env of no valid type is reported, not replaced by the flag's entries
    code, out, err = cli(capsys, "render", "slurm", "-f", spec_file(tmp_path, text), *flags, "--", "python", "t.py",
                         cwd=tmp_path)
    assert_one_line_error(code, out, err, needle)
