"""`ddpctl render ...` through the real console script, in subprocesses."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpctl.render import render_files
from ddpctl.spec import load_spec

DDPCTL = str(Path(sys.executable).parent / "ddpctl")
REPO = Path(__file__).resolve().parents[2]


def ddpctl(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def write(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


BAD = [
    ("zero-nodes", ["compose", "--nodes", "0"], None, "'nodes'"),
    ("negative-nodes", ["compose", "-n", "-2"], None, "'nodes'"),
    ("gpus-above-device-ids", ["compose", "-n", "2", "-g", "2", "--device-ids", "0,1,2"], None, "device_ids"),
    ("invalid-name", ["pytorchjob", "--name", "Bad_Name"], None, "DNS-1035"),
    ("ipc-and-shm", ["compose", "--ipc", "host", "--shm-size", "2g"], None, "ipc"),
    ("unknown-yaml-key", ["compose", "-f", "@nodez: 2\n"], None, "did you mean 'nodes'"),
    ("wrong-type", ["trainjob", "-f", "@nodes: [1, 2]\n"], None, "must be an integer"),
    ("port-out-of-range", ["slurm", "--port", "70000"], None, "65535"),
    ("port-too-low", ["compose", "--port", "80"], None, "1024"),
    ("missing-file", ["compose", "-f", "does-not-exist.yaml"], None, "does not exist"),
    ("shell-injection-name", ["slurm", "--name", "x$(touch pwned)"], None, "DNS-1035"),
    ("bad-env-key", ["compose", "-e", "1BAD=x"], None, "environment variable name"),
    ("env-without-equals", ["compose", "-e", "NOVALUE"], None, "KEY=VALUE"),
    ("hosts-nodes-mismatch", ["compose", "-n", "3", "--network", "host", "--hosts", "a,b"], None, "hosts"),
    ("nccl-on-cpu", ["pytorchjob", "--backend", "nccl"], None, "nccl"),
    ("bad-size", ["compose", "--shm-size", "lots"], None, "size"),
    ("bad-volume", ["compose", "-v", "nocolon"], None, "SOURCE:TARGET"),
    ("relative-volume-target", ["compose", "-v", "/a:rel"], None, "absolute"),
    ("unknown-target-option", ["compose", "--partition", "gpu"], None, "--partition"),
    ("unknown-target", ["helm"], None, "helm"),
    ("bad-yaml", ["compose", "-f", "@nodes: [1\n"], None, "not valid YAML"),
    ("trainjob-port", ["trainjob", "--port", "1234"], None, "29500"),
    ("trainjob-host-network", ["trainjob", "--network", "host"], None, "hostNetwork"),
    ("pytorchjob-hosts", ["pytorchjob", "-n", "2", "--network", "host", "--hosts", "a,b"], None, "hosts"),
    ("slurm-bad-container", ["slurm", "--container", "docker"], None, "pyxis"),
    ("slurm-unsafe-partition", ["slurm", "--partition", "gpu;touch x"], None, "#SBATCH"),
    ("slurm-ip-hosts", ["slurm", "-n", "2", "--network", "host", "--hosts", "10.0.0.1,10.0.0.2"], None, "node names"),
    ("host-network-no-hosts", ["compose", "-n", "2", "--network", "host"], None, "hosts"),
    ("restart-policy", ["pytorchjob", "--restart-policy", "Sometimes"], None, "OnFailure"),
    ("nodes-not-an-integer", ["compose", "-n", "two"], None, "must be a node count or MIN:MAX, got 'two'"),
    ("nodes-range-reversed", ["pytorchjob", "-n", "3:1"], None, "MIN is above MAX"),
    ("gpus-not-an-integer", ["compose", "-g", "two"], None, "not a valid integer"),
    ("missing-output-dir", ["compose"], "no/such/dir/out.yaml", "does not exist"),
    ("wheelhouse-without-push", ["compose", "--wheelhouse", "."], None, "--wheelhouse only applies"),
    ("index-url-without-push", ["pytorchjob", "--index-url", "https://mirror.example/simple"], None,
     "add --push REGISTRY/NAME"),
    ("requirements-without-push", ["trainjob", "--requirements", "r.txt"], None, "requirements without --push"),
]


@pytest.mark.parametrize("case, args, out, needle", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, case, args, out, needle):
    args = [write(tmp_path, a[1:]) if a.startswith("@") else a for a in args]
    target = tmp_path / (out or "out.yaml")
    result = ddpctl("render", *args, "-o", str(target), cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not target.exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".out.yaml")]  # no temp file left
    assert not (tmp_path / "pwned").exists()


def test_error_keeps_existing_output_untouched(tmp_path):
    target = tmp_path / "compose.yaml"
    target.write_text("previous\n")
    result = ddpctl("render", "compose", "-n", "0", "-o", str(target))
    assert result.returncode == 2
    assert target.read_text() == "previous\n"


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob", "slurm"])
def test_stdout_is_the_artifact_and_o_writes_the_same(tmp_path, target):
    spec_file = REPO / "examples" / "cpu-only.yaml"
    result = ddpctl("render", target, "-f", str(spec_file))
    assert result.returncode == 0 and result.stderr == ""
    (expected,) = render_files(target, load_spec(spec_file)).values()
    assert result.stdout == expected
    out = tmp_path / "artifact"
    result = ddpctl("render", target, "-f", str(spec_file), "-o", str(out))
    assert result.returncode == 0 and result.stdout == ""
    assert out.read_text() == expected
    assert result.stderr == f"wrote {out}\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_multi_host_output_naming(tmp_path):
    spec_file = str(REPO / "examples" / "multi-host.yaml")
    result = ddpctl("render", "compose", "-f", spec_file, "-o", str(tmp_path / "job.yml"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.node-0.yml", "job.node-1.yml"]
    outdir = tmp_path / "d"
    outdir.mkdir()
    assert ddpctl("render", "compose", "-f", spec_file, "-o", str(outdir)).returncode == 0
    assert sorted(p.name for p in outdir.iterdir()) == ["compose.node-0.yaml", "compose.node-1.yaml"]
    node1 = yaml.safe_load((outdir / "compose.node-1.yaml").read_text())
    (svc,) = node1["services"].values()
    assert svc["network_mode"] == "host" and "gpu-node-01" in svc["command"]
    assert ddpctl("render", "compose", "-f", spec_file, "-o", str(tmp_path / "new") + "/").returncode == 0
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["compose.node-0.yaml", "compose.node-1.yaml"]
    stdout = ddpctl("render", "compose", "-f", spec_file).stdout
    assert [d is not None for d in yaml.safe_load_all(stdout)] == [True, True]


def test_flags_override_file_and_command_after_dashes(tmp_path):
    spec_file = write(tmp_path, "name: merged\nnodes: 1\nenv:\n  A: file\n  B: file\n")
    result = ddpctl("render", "compose", "-f", spec_file, "-n", "2", "-e", "B=flag", "-e", "C=new",
                    "--", "python", "train.py", "--epochs", "3")
    assert result.returncode == 0, result.stderr
    doc = yaml.safe_load(result.stdout)
    svc = doc["services"]["merged-node-1"]
    # ddpctl's own launch variables (the thread rule for any command) beside the file's and the flags' values
    assert svc["environment"] == {"PYTHONUNBUFFERED": "1", "DDP_TRAIN_THREADS": "auto", "DDP_TRAIN_NODES_PER_HOST": "2",
                                  "A": "file", "B": "flag", "C": "new"}
    assert svc["command"][-5:] == ["--no-python", "python", "train.py", "--epochs", "3"]


def test_target_options_reach_the_manifest():
    r = ddpctl("render", "pytorchjob", "-n", "2", "--namespace", "ml", "--gang", "--kueue-queue", "q1")
    job = yaml.safe_load(r.stdout)
    assert job["metadata"]["namespace"] == "ml"
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q1"
    r = ddpctl("render", "slurm", "--partition", "gpu", "--time", "01:00:00", "--container", "pyxis")
    assert "#SBATCH --partition=gpu" in r.stdout and "#SBATCH --time=01:00:00" in r.stdout
    assert "--container-image=ddpctl/ddp-train:cpu" in r.stdout


@pytest.mark.parametrize("args", [[], ["render"], ["render", "compose"], ["render", "pytorchjob"],
                                  ["render", "trainjob"], ["render", "slurm"]])
def test_help_has_examples(args):
    result = ddpctl(*args, "--help")
    assert result.returncode == 0
    if args:
        assert "Examples:" in result.stdout and "ddpctl render" in result.stdout


def test_render_path_imports_neither_torch_nor_docker():
    code = (
        "import sys\n"
        "from ddpctl.cli.main import main\n"
        "for argv in (['--help'], ['render', 'compose', '-n', '2'], ['render', 'slurm'], "
        "['render', 'pytorchjob'], ['render', 'trainjob']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'docker', 'jsonschema', 'pydantic'))\n"
        "print('IMPORTED', bad, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "IMPORTED []" in result.stderr


def test_push_and_bake_take_a_code_directory_above_the_current_one(tmp_path):
    # --workdir/--requirements with --push (render) or --bake (up) are read here to build the image, never mounted
    # as a hostPath: '../proj' is made absolute instead of refused with the hostPath rule
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text("print('hi')\n")
    (tmp_path / "proj" / "reqs.txt").write_text("\n")
    (tmp_path / "elsewhere").mkdir()
    args = ["-n", "2", "--workdir", "../proj", "--requirements", "../proj/reqs.txt", "--dry-run"]
    result = ddpctl("render", "compose", *args, "--push", "127.0.0.1:5999/t/p", "--", "python", "train.py",
                    cwd=tmp_path / "elsewhere")
    assert result.returncode == 0, result.stderr
    assert f"from:         {tmp_path / 'proj'} (2 files: reqs.txt, train.py)" in result.stdout
    assert f"requirements: {tmp_path / 'proj' / 'reqs.txt'}" in result.stdout
    up = ddpctl("up", *args, "--bake", "--", "python", "train.py", cwd=tmp_path / "elsewhere")
    assert up.returncode == 0 and f"from:         {tmp_path / 'proj'} (2 files" in up.stderr, up.stderr
    mounted = ddpctl("up", "-n", "2", "--workdir", "../proj", "--dry-run", cwd=tmp_path / "elsewhere")
    assert mounted.returncode == 2 and "'..'" in mounted.stderr  # a mount keeps the host-path rule
