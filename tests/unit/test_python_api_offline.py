"""The Python API without a Docker Engine: what `import ddpctl` costs and exposes, ddpctl.render byte for byte
against the golden manifests and `ddpctl render`, ddpctl.validate, and bad input as one BadInput with the CLI's
line. The engine-side calls (up, Job, run) are in tests/integration/test_python_api.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ddpctl  # noqa: E402
from render_cases import ALL  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
DDPCTL = str(Path(sys.executable).with_name("ddpctl"))
CASES = [(t, c) for t, cases in ALL.items() for c in cases]


def golden_text(target: str, case: str) -> str:
    """The golden file as `ddpctl render` prints it: the '# file: NAME' header of each file taken out."""
    text = (GOLDEN / target / (case + (".sbatch" if target == "slurm" else ".yaml"))).read_text(encoding="utf-8")
    return re.sub(r"(?:^|(?<=---\n))# file: [^\n]*\n", "", text)


@pytest.mark.parametrize("target, case", CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_render_gives_the_golden_manifest_byte_for_byte(target, case):
    from ddpctl.spec import spec_from_dict

    # a JobSpec as the golden test builds it (relative host paths kept, as a file's are not)
    assert ddpctl.render(target, spec=spec_from_dict(ALL[target][case])) == golden_text(target, case)


def test_the_cli_prints_what_ddpctl_render_returns(tmp_path):
    # one case of each target (the CLI costs a process each), from a job file as a user gives it
    picked = [(t, next(c for c in ALL[t] if "workspace" not in ALL[t][c])) for t in ALL]
    for target, case in picked:
        job = tmp_path / f"{target}-{case}.yaml"
        job.write_text(yaml.safe_dump(ALL[target][case]), encoding="utf-8")
        cli = subprocess.run([DDPCTL, "render", target, "-f", str(job)], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout == ddpctl.render(target, file=job) == golden_text(target, case), (target, case)


def test_keyword_arguments_override_a_file_as_flags_do(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: demo\nnodes: 2\nenv:\n  A: '1'\n  B: '2'\nkubernetes:\n  namespace: team\n")
    cli = subprocess.run([DDPCTL, "render", "pytorchjob", "-f", str(job), "-n", "3", "-e", "B=9", "--queue", "q",
                          "--", "python", "t.py"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    api = ddpctl.render("pytorchjob", file=job, nodes=3, env={"B": "9"}, kubernetes={"queue": "q"},
                        command=["python", "t.py"])
    assert api == cli.stdout
    assert "namespace: team" in api and "queue" in api


def test_bad_input_is_one_bad_input_with_the_cli_line(tmp_path):
    cli = subprocess.run([DDPCTL, "render", "slurm", "--nodes", "0"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2
    with pytest.raises(ddpctl.BadInput) as caught:
        ddpctl.render("slurm", nodes=0)
    assert cli.stderr.strip() == f"error: {caught.value.message}"
    assert caught.value.exit_code == 2 and caught.value.fix
    with pytest.raises(ddpctl.BadInput, match=r"unknown job spec key 'nodez'.*did you mean 'nodes'"):
        ddpctl.render("compose", nodez=2)
    with pytest.raises(ddpctl.BadInput, match="unknown render target 'swarm'; use one of: compose"):
        ddpctl.render("swarm")
    with pytest.raises(ddpctl.BadInput, match="job file .* does not exist"):
        ddpctl.render("compose", file=tmp_path / "missing.yaml")
    with pytest.raises(ddpctl.BadInput, match="command= must be a list of strings"):
        ddpctl.render("compose", command="python train.py")
    with pytest.raises(ddpctl.BadInput, match="both spec= and file="):
        ddpctl.render("compose", spec={"nodes": 2}, file="job.yaml")
    with pytest.raises(ddpctl.BadInput, match="slurm does not support"):  # a target refusing a field
        ddpctl.render("slurm", nodes=2, ipc="private", shm_size="1g")
    assert issubclass(ddpctl.BadInput, ddpctl.DdpctlError)


def test_validate_takes_a_path_a_list_or_text(tmp_path):
    text = ddpctl.render("trainjob", nodes=2)
    report = ddpctl.validate(text)
    assert report.errors == [] and report.summary().startswith("ok: 1 document(s)")
    (tmp_path / "tj.yaml").write_text(text.replace("numNodes: 2", "numNodes: two"))
    for given in (tmp_path / "tj.yaml", str(tmp_path / "tj.yaml"), [tmp_path], str(tmp_path)):
        report = ddpctl.validate(given)
        assert report.errors and "numNodes" in str(report.errors[0]), given
    cli = subprocess.run([DDPCTL, "validate", str(tmp_path / "tj.yaml")], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and cli.stdout.splitlines() == [str(p) for p in report.problems]
    with pytest.raises(ddpctl.BadInput, match="does not exist"):
        ddpctl.validate(str(tmp_path / "nope.yaml"))
    with pytest.raises(ddpctl.BadInput, match="has no YAML document"):
        ddpctl.validate("# nothing\n")


def test_import_is_cheap_and_the_names_resolve():
    code = ("import sys, ddpctl; heavy = [m for m in ('torch', 'docker', 'yaml', 'typer', 'ddpctl.api.jobs', "
            "'cloudpickle') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    for name in ddpctl.__all__:
        assert getattr(ddpctl, name) is not None, name
        assert getattr(ddpctl, name).__doc__, f"ddpctl.{name} has no docstring"
    assert sorted(ddpctl.__all__) == ddpctl.__all__
    assert (Path(ddpctl.__file__).parent / "py.typed").exists()
    with pytest.raises(AttributeError):
        ddpctl.no_such_name  # noqa: B018


def test_a_subpackage_of_the_same_name_leaves_the_function_in_place():
    from ddpctl.bench import plan  # noqa: F401
    from ddpctl.render import compose  # noqa: F401
    from ddpctl.validate import schema  # noqa: F401

    assert callable(ddpctl.render) and callable(ddpctl.validate) and callable(ddpctl.bench)
    assert ddpctl.render.__module__ == "ddpctl.api.manifests"
    assert sys.modules["ddpctl.render"].render_files  # the package is still there for its importers


def test_spec_keywords_take_the_forms_of_the_job_file():
    from ddpctl.api.spec_input import job_spec
    from ddpctl.spec import spec_to_dict

    spec = job_spec({"nodes": 2, "env": {"A": 1, "B": "x"}, "kubernetes": {"queue": "q"}, "volumes": ("/d:/d",)})
    assert spec.nodes == 2 and spec.env_dict == {"A": "1", "B": "x"} and spec.kubernetes.queue == "q"
    again = job_spec({"nproc_per_node": 2}, spec=spec)  # a JobSpec as the base, keywords over it
    assert spec_to_dict(again) == {**spec_to_dict(spec), "nproc_per_node": 2}
    assert job_spec({}, spec={"nodes": 3, "env": {"A": "1"}}).nodes == 3
    merged = job_spec({"env": {"B": "2"}}, spec={"env": {"A": "1", "B": "1"}})
    assert merged.env_dict == {"A": "1", "B": "2"}


def test_a_hand_built_jobspec_is_checked_like_any_other_input(tmp_path):
    from ddpctl.spec import JobSpec

    # a JobSpec made by hand has had no check: what the Slurm script would run or export is refused
    for spec, said in ((JobSpec(env=(("A=$(touch x)", "1"),)), "not a valid environment variable name"),
                       (JobSpec(env=(("PATH", "/evil"),)), "PATH is reserved"),
                       (JobSpec(image="a b"), "not a valid image reference"),
                       (JobSpec(command=("--node-rank=5",)), "read as its own option")):
        with pytest.raises(ddpctl.BadInput, match=said):
            ddpctl.render("slurm", spec=spec)
    assert "#SBATCH --nodes=2" in ddpctl.render("slurm", spec=JobSpec(nodes=2))


def test_python_values_a_job_file_cannot_hold_are_one_bad_input():
    deep: list = []
    inner = deep
    for _ in range(100):
        inner.append([])
        inner = inner[0]
    for kw, said in ((dict(memory_per_node=10**5000), "a number over 2"), (dict(env={"A": 10**5000}), "a number over 2"),
                     (dict(name=deep), "nested more than"), (dict(env={"A=B": "1"}), "contains '='"),
                     (dict(env={"A": float("nan")}), "is nan"), (dict(file="job\0.yaml"), "NUL character")):
        with pytest.raises(ddpctl.BadInput, match=said):
            ddpctl.render("slurm", **kw)
    for given, said in (([1], "an item of it is not a path"), ([""], "an empty path"), ("a\0b", "NUL character")):
        with pytest.raises(ddpctl.BadInput, match=said):
            ddpctl.validate(given)
    cli = subprocess.run([DDPCTL, "validate", ""], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2 and cli.stderr.startswith("error: an empty path was given"), cli.stderr
