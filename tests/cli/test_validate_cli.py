"""`ddpctl validate` and `ddpctl render --validate` through the real console script, in subprocesses."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

DDPCTL = str(Path(sys.executable).parent / "ddpctl")
REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"

GOOD_PJ = (GOLDEN / "pytorchjob" / "gpu-2x8.yaml").read_text()


def ddpctl(*args, cwd=None, stdin=None):
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
                          input=stdin)


def no_traceback(result):
    assert "Traceback" not in result.stderr + result.stdout


def test_every_golden_file_and_example_validates_exit_0():
    result = ddpctl("validate", str(GOLDEN), str(REPO / "compose"), str(REPO / "k8s"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ok: ") and "PyTorchJob" in lines[0], result.stderr


def test_problems_are_file_path_message_lines_exit_1(tmp_path):
    bad = GOOD_PJ.replace("replicas: 1\n", "replicas: 2\n", 1).replace("      restartPolicy: OnFailure\n",
                                                                         "      restartPolicy: Sometimes\n", 1)
    bad += "status: {}\n"
    f = tmp_path / "job.yaml"
    f.write_text(bad)
    good = tmp_path / "ok.yaml"
    good.write_text(GOOD_PJ)
    result = ddpctl("validate", str(good), str(f))
    no_traceback(result)
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines and all(line.startswith(f"{f}:") for line in lines), lines
    assert f"{f}:spec.pytorchReplicaSpecs.Master.replicas: must be set to exactly 1, got 2" in lines
    assert any(line.startswith(f"{f}:spec.pytorchReplicaSpecs.Master.restartPolicy: must be one of")
               for line in lines)
    summary = result.stderr.strip().splitlines()
    assert len(summary) == 1 and "problem(s)" in summary[0] and "2 file(s)" in summary[0]


@pytest.mark.parametrize("case", ["missing", "not-yaml", "unknown-kind", "no-args", "empty-dir", "binary",
                                  "billion-laughs"])
def test_usage_errors_one_line_exit_2(tmp_path, case):
    if case == "missing":
        args, needle = [str(tmp_path / "nope.yaml")], "does not exist"
    elif case == "not-yaml":
        (tmp_path / "x.yaml").write_text("a: [1\n")
        args, needle = [str(tmp_path / "x.yaml")], "is not valid YAML"
    elif case == "unknown-kind":
        (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
        args, needle = [str(tmp_path / "svc.yaml")], "kind 'Service'"
    elif case == "no-args":
        args, needle = [], "no file given"
    elif case == "empty-dir":
        (tmp_path / "d").mkdir()
        args, needle = [str(tmp_path / "d")], "has no *.yaml"
    elif case == "binary":
        (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00bad")
        args, needle = [str(tmp_path / "b.yaml")], "not UTF-8"
    else:
        text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [" + ", ".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefghi", "bcdefghij", strict=True))
        (tmp_path / "lol.yaml").write_text(text)
        args, needle = [str(tmp_path / "lol.yaml")], "expands to more than"
    result = ddpctl("validate", *args)
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr


def test_skip_unknown_and_stdin(tmp_path):
    svc = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n"
    result = ddpctl("validate", "--skip-unknown", "-", stdin=svc + GOOD_PJ)
    assert result.returncode == 0, result.stderr
    assert "1 other document(s) skipped" in result.stderr


def test_directory_is_walked_and_non_manifests_ignored(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "job.yml").write_text(GOOD_PJ.replace("name: big", "name: Big", 1))
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.yaml").write_text("not: [valid\n")
    result = ddpctl("validate", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith(f"{tmp_path}/sub/job.yml:metadata.name: ")


def test_warnings_do_not_fail(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("services:\n  a:\n    image: x\n    environment: {HF_TOKEN: hf_secret}\n")
    result = ddpctl("validate", str(f))
    assert result.returncode == 0
    assert "warning: HF_TOKEN looks like a secret" in result.stdout and "hf_secret" not in result.stdout
    assert ddpctl("validate", "--no-warnings", str(f)).stdout == ""


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob"])
def test_render_validate_passes_and_prints_the_manifest(target):
    result = ddpctl("render", target, "-n", "2", "--validate")
    assert result.returncode == 0, result.stderr
    assert result.stdout and result.stderr == ""


def test_render_validate_failure_writes_nothing(tmp_path):
    # A renderer made to emit an unknown key (no spec can produce one today): --validate stops it.
    code = ("import sys; from ddpctl.render import pytorchjob as p; orig = p.render\n"
            "def bad(spec):\n    d = orig(spec); d['spec']['bogus'] = 1; return d\n"
            "p.render = bad\nfrom ddpctl.cli.main import main\n"
            f"sys.argv = ['ddpctl', 'render', 'pytorchjob', '--validate', '-o', {str(tmp_path / 'pj.yaml')!r}]\n"
            "main()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    no_traceback(result)
    assert result.returncode == 1, result.stderr
    assert "pytorchjob.yaml:spec.bogus: is not a known field" in result.stderr
    assert "nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_slurm_has_no_validate_option():
    result = ddpctl("render", "slurm", "--validate")
    assert result.returncode == 2 and "--validate" in result.stderr


def test_help_imports_no_validator():
    code = ("import sys\nfrom ddpctl.cli.main import main\nsys.argv = ['ddpctl', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('ddpctl.validate', 'jsonschema', 'yaml') if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout[-300:]


def test_a_file_name_with_terminal_controls_is_shown_escaped(tmp_path):
    # every diagnostic line goes through one writer that shows control characters as escapes
    (tmp_path / "y\x1b[31m.yaml").write_text("a: [\n")
    result = ddpctl("validate", str(tmp_path))
    assert result.returncode == 2 and "\x1b" not in result.stderr, result.stderr
    assert "y\\x1b[31m.yaml:2 is not valid YAML" in result.stderr
    no_traceback(result)
