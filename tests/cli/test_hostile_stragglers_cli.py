"""Stragglers of the first hostile-input sweep, through the CLI: secrets in ``up --dry-run``, secret references,
repeated env names, and a dry-run push that must refuse as the real one does. Refusals: exit 2, one line,
nothing on stdout."""

from __future__ import annotations

import pytest
import yaml

from ddpctl.cli.main import main


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line(code, out, err, needle):
    assert code == 2 and out == "" and "Traceback" not in err, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_up_dry_run_masks_url_passwords_and_common_token_names(capsys, monkeypatch):
    monkeypatch.setenv("DDPCTL_DOCKER_HOSTS", "")
    code, out, err = cli(capsys, "up", "--dry-run", "-e", "DATABASE_URL=postgres://app:pw-1@db:5432/x",
                         "-e", "PGPASSWORD=pw-2", "-e", "MYSQL_PWD=pw-3", "-e", "GIT_URL=https://pw-4@git.example/r",
                         "-e", "CI_JOB_JWT=pw-5", "-e", "PWD_NOT=1", "--", "python", "t.py",
                         "--db", "mysql://u:pw-6@h/x")
    assert code == 0, err
    assert not any(f"pw-{i}" in out for i in range(1, 7)), out
    env = yaml.safe_load(out)["containers"][0]["environment"]
    assert env["DATABASE_URL"] == "postgres://app:***@db:5432/x" and env["GIT_URL"] == "https://***@git.example/r"


@pytest.mark.parametrize("args,needle", [
    (["compose", "--secret-env", "HF_TOKEN=hf-token:"], "empty key"),
    (["pytorchjob", "--secret-env", "HF_TOKEN=hf-token:"], "empty key"),
    (["compose", "-f", "@secret_env: [HF_TOKEN=a, HF_TOKEN=b]\n"], "twice"),
    (["compose", "-f", "@env: [A=1, A=2]\n"], "given twice"),
    (["compose", "-e", "A=1", "-e", "A=2"], "twice"),
    (["compose", "--secret-env", "HF_TOKEN", "--secret-env", "HF_TOKEN=s"], "twice"),
])
def test_secret_references_and_repeated_names_are_refused(capsys, tmp_path, args, needle):
    args = list(args)
    for i, a in enumerate(args):
        if a.startswith("@"):
            p = tmp_path / "job.yaml"
            p.write_text(a[1:])
            args[i] = str(p)
    one_line(*cli(capsys, "render", *args), needle)


def test_a_flag_still_overrides_the_files_list_entry(capsys, tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("env: [A=1, B=2]\nsecret_env: [HF_TOKEN=a]\n")
    code, out, err = cli(capsys, "render", "compose", "-f", str(p), "-e", "A=3", "--secret-env", "HF_TOKEN=b")
    assert code == 0, err
    assert "A: '3'" in out or "A: \"3\"" in out or "A=3" in out


def test_up_dry_run_refuses_an_unset_secret_env_variable(capsys, monkeypatch):
    monkeypatch.delenv("H19_UNSET_TOKEN_7Q", raising=False)
    monkeypatch.setenv("DDPCTL_DOCKER_HOSTS", "")
    one_line(*cli(capsys, "up", "--dry-run", "--secret-env", "H19_UNSET_TOKEN_7Q"), "is not set")


TAGGED = ["!!bool maybe", "!!timestamp nope", "!!int ''", "!!float ''", "!!int abc", "!!int 0x", "!!float x",
          "!!timestamp 2020-99-99", "!!bool ''"]


@pytest.mark.parametrize("value", TAGGED)
def test_a_type_tag_that_cannot_convert_its_value_is_one_line_everywhere(capsys, tmp_path, monkeypatch, value):
    monkeypatch.setenv("DDPCTL_DOCKER_HOSTS", "")
    job = tmp_path / "job.yaml"
    job.write_text(f"nodes: {value}\n")
    for args in (["render", "compose"], ["render", "slurm"], ["up", "--dry-run"]):
        one_line(*cli(capsys, *args, "-f", str(job)), "cannot read")
    compose = tmp_path / "compose.yaml"
    compose.write_text(f"services:\n  a:\n    image: x\n    cpus: {value}\n")
    code, out, err = cli(capsys, "validate", str(compose))
    assert code != 0 and "Traceback" not in err + out, (code, out, err)


def test_a_trainjob_over_the_crd_item_limits_is_refused(capsys, tmp_path):
    def job(volumes: int, env: int = 0) -> str:
        p = tmp_path / f"job-{volumes}-{env}.yaml"
        p.write_text("volumes:\n" + "".join(f"  - /d{i}:/m{i}\n" for i in range(volumes))
                     + ("env:\n" + "".join(f"  V{i}: x\n" for i in range(env)) if env else ""))
        return str(p)

    one_line(*cli(capsys, "render", "trainjob", "-f", job(128)), "more than the 128 its CRD allows")
    one_line(*cli(capsys, "render", "trainjob", "-f", job(1, env=128)), "env entries")
    code, out, err = cli(capsys, "render", "trainjob", "-f", job(127), "--validate")  # /dev/shm makes 128
    assert code == 0 and out.count("mountPath: /m") == 127, err


@pytest.mark.parametrize("runtime,image", [
    ("pyxis", "Nvcr.io#Nvidia/PyTorch:1"), ("pyxis", "nvcr.io#"), ("pyxis", "#x"), ("pyxis", "a b"),
    ("pyxis", "docker://a#b#c"), ("apptainer", "docker://UPPER/x"), ("apptainer", "ftp://h/x.sif"),
    ("apptainer", "library://A/B"), ("apptainer", "https://-x/y.sif"), ("pyxis", "x@y@z"),
])
def test_a_slurm_container_image_follows_the_reference_grammar(capsys, runtime, image):
    one_line(*cli(capsys, "render", "slurm", "--container", runtime, "--container-image", image),
             "is not an image reference")


@pytest.mark.parametrize("runtime,image", [
    ("pyxis", "nvcr.io#nvidia/pytorch:25.08-py3"), ("pyxis", "me@nvcr.io#nvidia/pytorch:25.08-py3"),
    ("pyxis", "/images/train.sqsh"), ("apptainer", "docker://pytorch/pytorch:2.13.0"),
    ("apptainer", "library://sylabs/default/alpine:3.19"), ("apptainer", "oras://ghcr.io/a/b:1"),
    ("apptainer", "/images/train.sif"), ("apptainer", "docker-daemon:img:1"),
])
def test_valid_slurm_container_images_render(capsys, runtime, image):
    code, out, err = cli(capsys, "render", "slurm", "--container", runtime, "--container-image", image)
    assert code == 0 and image in out, err


def test_a_memory_limit_below_the_engines_minimum_is_refused(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("memory_per_node: 1m\n")
    for target in ("compose", "pytorchjob", "slurm"):
        one_line(*cli(capsys, "render", target, "-f", str(job)), "less than the 6m")
