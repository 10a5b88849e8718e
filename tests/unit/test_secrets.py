"""Secret references (secret_env / --secret-env): the value reaches the job on every target and lands in no
rendered file, plan or dry run. Real parts: the console script, bash running the sbatch script (recording srun),
the real docker-compose 1.x client, the bundled CRDs; the Kubernetes Secret is emulated (no API server here)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import k8s_contract  # tests/support/k8s_contract.py: the operators, emulated
import render_support as rs
from ddpctl.errors import SpecError, UnsupportedFeature, UsageError
from ddpctl.local import executor
from ddpctl.local.plan import container_request, plan_local
from ddpctl.render import compose, pytorchjob, render_files, slurm, trainjob
from ddpctl.secrets import FROM_ENV, MASK, SecretEnv, looks_secret, mask_env
from ddpctl.spec import load_spec, spec_from_dict, spec_to_dict
from ddpctl.validate import check_document

DDPCTL = str(Path(sys.executable).parent / "ddpctl")
TOKEN = "hf_Zx81-not-a-real-token"  # present in the caller's environment, must appear in no output


def ddpctl(*args, env=None, cwd=None):
    full = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    full.update(env or {})
    return subprocess.run([DDPCTL, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=60)


# ------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "apiKey",
                                  "GITHUB_PAT", "SENTRY_DSN", "MY_CREDENTIALS", "hf-token", "TOKEN"])
def test_secret_looking_names(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "KEYBOARD", "MONKEY", "PATHS", "K",
                                  "PYTHONUNBUFFERED", "OMP_NUM_THREADS", "PASSTHROUGH"])
def test_ordinary_names(name):
    assert not looks_secret(name)


def test_mask_env_keeps_empty_values_and_references():
    assert mask_env({"HF_TOKEN": "x", "A": "y", "DB_PASSWORD": "", "API_KEY": FROM_ENV}) == \
        {"HF_TOKEN": MASK, "A": "y", "DB_PASSWORD": "", "API_KEY": FROM_ENV}


# -------------------------------------------------------------------------------------------- spec


def test_spec_forms_and_round_trip():
    spec = spec_from_dict({"secret_env": {"HF_TOKEN": "hf-token:token", "WANDB_API_KEY": "wandb",
                                          "DB_PASSWORD": None, "X_KEY": {"secret": "x", "key": "k.1"}}})
    assert spec.secret_env == (SecretEnv("HF_TOKEN", "hf-token", "token"), SecretEnv("WANDB_API_KEY", "wandb"),
                               SecretEnv("DB_PASSWORD"), SecretEnv("X_KEY", "x", "k.1"))
    assert spec_from_dict(spec_to_dict(spec)) == spec
    listed = spec_from_dict({"secret_env": ["HF_TOKEN=hf-token:token", "DB_PASSWORD"]})
    assert listed.secret_env == (SecretEnv("HF_TOKEN", "hf-token", "token"), SecretEnv("DB_PASSWORD"))


def test_flags_add_to_and_override_the_file(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text("secret_env:\n  HF_TOKEN: old:key\n  A_TOKEN: a\n")
    spec = load_spec(f, {"secret_env": ["HF_TOKEN=new", "B_TOKEN"]})
    assert spec.secret_env == (SecretEnv("A_TOKEN", "a"), SecretEnv("HF_TOKEN", "new"), SecretEnv("B_TOKEN"))


@pytest.mark.parametrize("value, needle", [
    (["1BAD"], "not a valid environment variable name"),
    (["RANK=s:k"], "reserved"),
    (["HF_TOKEN=Bad_Secret"], "DNS-1123 subdomain"),
    (["HF_TOKEN=s:a/b"], "not a valid key"),
    ({"HF_TOKEN": 5}, "SECRET[:KEY]"),
    ({"HF_TOKEN": {"name": "x"}}, "must have 'secret'"),
    ("HF_TOKEN", "mapping or a list"),
])
def test_bad_references_are_spec_errors(value, needle):
    with pytest.raises(SpecError, match=needle.replace("[", r"\[")):
        spec_from_dict({"secret_env": value})


@pytest.mark.parametrize("data, needle", [
    ({"secret_env": [f"HF_TOKEN={TOKEN}"]}, "HF_TOKEN=...: the part after '=' must be the name of a Kubernetes"),
    ({"secret_env": {"HF_TOKEN": TOKEN}}, "the value is not shown"),
    ({"secret_env": [f"HF_TOKEN={TOKEN}:"]}, "HF_TOKEN=... has an empty key"),
    ({"secret_env": [f"HF_TOKEN=ok:{TOKEN}!"]}, "HF_TOKEN=...: the part after ':' is not a valid key"),
    ({"secret_env": {"HF_TOKEN": {"secret": TOKEN}}}, "HF_TOKEN=...: 'secret' must be"),
    ({"secret_env": {"HF_TOKEN": {"secret": "ok", "key": TOKEN + "!"}}}, "HF_TOKEN=...: 'key' is not"),
    ({"secret_env": {"HF_TOKEN": {TOKEN: "x"}}}, "HF_TOKEN=... must have 'secret'"),
    ({"secret_env": [{"HF_TOKEN": TOKEN}]}, "entry is a dict"), ({"secret_env": [f"HF_TOKEN:{TOKEN}"]}, "'HF_TOKEN...'"),
    ({"env": [f"HF_TOKEN:{TOKEN}"]}, "env entry 'HF_TOKEN...' has no '='"), ({"env": [f"HF_TOKEN {TOKEN}"]}, "'HF_TOKEN...'"),
    ({"env": [{"HF_TOKEN": TOKEN}]}, "env entry is a mapping"), ({"env": f"HF_TOKEN={TOKEN}"}, "got a string (not shown)"),
    ({"env": [f"HF_TOKEN:{TOKEN}=1"]}, "'env.HF_TOKEN...' 'HF_TOKEN...' is not a valid"),
    ({"env": {f"HF_TOKEN {TOKEN}": "1"}}, "'env.HF_TOKEN...' 'HF_TOKEN...' is not a valid"),
])
def test_no_error_line_shows_a_value_typed_in_the_wrong_place(data, needle):
    # a token where a Secret name, a key or an env entry's name belongs: the line names the variable, not the token
    with pytest.raises(SpecError) as exc:
        spec_from_dict(data)
    message = exc.value.message
    assert "hf_Zx81" not in message and "not-a-real" not in message and needle in message, message


def test_the_name_part_of_an_entry_is_shown_escaped():
    from ddpctl.rules import shown_name

    assert shown_name("HF_TOKEN") == "'HF_TOKEN'" and shown_name("HF_TOKEN:hf_x") == "'HF_TOKEN...'"
    assert shown_name("A\x1b[2J x") == "'A\\x1b[2J...'" and shown_name("X\n") == "'X\\n'"
    assert shown_name("N" * 100) == repr("N" * 64 + "...") and shown_name("") == "''"
    assert shown_name("HF_TOKEN:x", quoted=False) == "HF_TOKEN..."


def test_a_name_in_env_and_secret_env_is_an_error():
    with pytest.raises(SpecError, match="which env sets too"):
        spec_from_dict({"env": {"HF_TOKEN": "x"}, "secret_env": {"HF_TOKEN": "s"}})


# ------------------------------------------------------------------------------------------ targets

SPEC = {"name": "sec", "nodes": 2, "env": {"A": "1"}, "secret_env": {"HF_TOKEN": "hf-token:token"}}


def test_kubernetes_targets_render_secret_key_refs_that_validate():
    spec = spec_from_dict(SPEC)
    for render in (pytorchjob.render, trainjob.render):
        doc = render(spec)
        assert check_document(doc, doc["kind"]) == []
        assert rs.crd_errors(doc) == []
        pods = k8s_contract.pods_for(doc, secrets={("hf-token", "token"): TOKEN})
        assert all(p.env["HF_TOKEN"] == TOKEN and p.env["A"] == "1" for p in pods)
        with pytest.raises(k8s_contract.ContractError, match="does not exist"):
            k8s_contract.pods_for(doc)  # no such Secret in the namespace: the pod would not start
    ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    assert ref in trainjob.render(spec)["spec"]["trainer"]["env"]


def test_kubernetes_targets_need_a_secret_name():
    spec = spec_from_dict({"secret_env": ["HF_TOKEN"]})
    for render in (pytorchjob.render, trainjob.render):
        with pytest.raises(UnsupportedFeature, match="NAME=SECRET"):
            render(spec)


def test_compose_leaves_the_value_to_docker_compose():
    doc = compose.render(spec_from_dict(SPEC))
    for svc in doc["services"].values():
        assert svc["environment"]["HF_TOKEN"] is None
    assert check_document(doc, "compose") == []


@pytest.mark.skipif(shutil.which("docker-compose") is None and os.environ.get("DDPCTL_REQUIRE_DOCKER") != "1",
                    reason="docker-compose not installed (scripts/ci-setup.sh installs it)")
def test_real_docker_compose_takes_the_value_from_its_environment(tmp_path):
    path = tmp_path / "compose.yaml"
    path.write_text(render_files("compose", spec_from_dict(SPEC))["compose.yaml"])
    assert TOKEN not in path.read_text()
    env = dict(os.environ, HF_TOKEN=TOKEN)
    result = subprocess.run(["docker-compose", "-f", str(path), "config"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert all(s["environment"]["HF_TOKEN"] == TOKEN for s in services.values())


def test_slurm_takes_the_value_from_the_submitting_environment(tmp_path):
    script = slurm.render(spec_from_dict(SPEC))
    assert TOKEN not in script and "HF_TOKEN" in script
    got = rs.run_sbatch(script, tmp_path, nodes=2, extra_env={"HF_TOKEN": TOKEN})
    assert got["env"]["HF_TOKEN"] == TOKEN and got["env"]["A"] == "1"
    with pytest.raises(AssertionError, match="HF_TOKEN: is not set: export it before sbatch"):
        rs.run_sbatch(script, tmp_path, nodes=2)


def test_up_plan_and_dry_run_never_hold_the_value(tmp_path):
    spec = spec_from_dict(SPEC)
    plan = plan_local(spec, cwd=tmp_path)
    printed = yaml.safe_dump(plan.to_dict())
    assert TOKEN not in printed and FROM_ENV in printed
    assert container_request(plan.containers[0], {"HF_TOKEN": TOKEN})["environment"]["HF_TOKEN"] == TOKEN
    assert executor.secret_values(plan, {"HF_TOKEN": TOKEN}) == {"HF_TOKEN": TOKEN}
    with pytest.raises(UsageError, match="HF_TOKEN is not set"):
        executor.secret_values(plan, {})


# ----------------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("target", ["compose", "pytorchjob", "trainjob", "slurm"])
def test_no_rendered_file_holds_the_token(tmp_path, target):
    result = ddpctl("render", target, "-n", "2", "--secret-env", "HF_TOKEN=hf-token:token", "-o", str(tmp_path) + "/",
                    env={"HF_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    files = list(tmp_path.iterdir())
    assert files and all(TOKEN not in f.read_text() and "HF_TOKEN" in f.read_text() for f in files)
    assert TOKEN not in result.stderr


def test_dry_run_masks_secret_looking_values_and_references():
    result = ddpctl("up", "--dry-run", "-e", f"HF_TOKEN={TOKEN}", "-e", "OK=visible", "--secret-env", "DB_PASSWORD",
                    env={"DB_PASSWORD": TOKEN})
    assert result.returncode == 0, result.stderr
    assert TOKEN not in result.stdout + result.stderr
    env = yaml.safe_load(result.stdout)["containers"][0]["environment"]
    assert env["HF_TOKEN"] == MASK and env["OK"] == "visible" and env["DB_PASSWORD"] == FROM_ENV


def test_rendering_a_literal_secret_warns_once_per_name():
    result = ddpctl("render", "pytorchjob", "-e", f"HF_TOKEN={TOKEN}", "-e", "OK=1")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "warning: env HF_TOKEN looks like a secret and its value is written in clear into the pytorchjob output; "
        "use --secret-env HF_TOKEN=SECRET[:KEY] to keep it out of the file"]


def test_up_without_the_secret_in_the_environment_fails_before_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "UTEST_DDP_NOT_SET_TOKEN"}
    result = subprocess.run([DDPCTL, "up", "--name", "sec-missing", "--secret-env", "UTEST_DDP_NOT_SET_TOKEN"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "UTEST_DDP_NOT_SET_TOKEN is not set in this environment" in lines[0]


@pytest.mark.parametrize("args, needle", [
    (["render", "compose", "--secret-env", "PATH"], "reserved"),
    (["render", "trainjob", "--secret-env", "PET_NNODES=x"], "reserved"),
    (["render", "pytorchjob", "--secret-env", "HF_TOKEN"], "NAME=SECRET[:KEY]"),
    (["render", "compose", "-e", "HF_TOKEN=x", "--secret-env", "HF_TOKEN"], "which env sets too"),
    (["render", "compose", "--secret-env", "X=Y_Z"], "DNS-1123"),
])
def test_bad_secret_flags_one_line_exit_2(args, needle):
    result = ddpctl(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
