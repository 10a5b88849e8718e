"""Ways around the input rules, through the CLI: reserved env names through apptainer's and srun's own
variables, secrets echoed by an error line, credentials in a container image URL, non-ASCII image tags and
suggested commands that a shell would expand. Refusals: exit 2, one line, nothing on stdout."""

from __future__ import annotations

import re
import subprocess

import pytest

from ddpctl.cli.main import main


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line(code, out, err, *needles):
    assert code == 2 and out == "" and "Traceback" not in err, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


# ------------------------------------------------------------------------------------ reserved env names


@pytest.mark.parametrize("entry, needles", [
    ("APPTAINERENV_CUDA_VISIBLE_DEVICES=0", ["APPTAINERENV_CUDA_VISIBLE_DEVICES", "sets CUDA_VISIBLE_DEVICES",
                                             "--device-ids"]),
    ("SINGULARITYENV_PET_NNODES=8", ["SINGULARITYENV_PET_NNODES", "sets PET_NNODES", "--nodes"]),
    ("APPTAINERENV_PREPEND_PATH=/evil/bin", ["sets PATH"]),
    ("SRUN_EXPORT_ENV=NONE", ["SRUN_EXPORT_ENV is reserved", "slurm:"]),
    ("EXECIGNORE=*/srun", ["EXECIGNORE is reserved", "remove it"]),
    ("POSIXLY_CORRECT=1", ["POSIXLY_CORRECT is reserved"]),
    ("APPTAINER_BIND=/:/host", ["APPTAINER_BIND is reserved", "volumes:"]),
    ("SINGULARITY_CONTAINALL=1", ["SINGULARITY_CONTAINALL is reserved"]),
])
def test_reserved_names_cannot_come_back_through_apptainer_srun_or_bash(capsys, entry, needles):
    one_line(*cli(capsys, "render", "slurm", "--container", "apptainer", "-e", entry, "--", "python", "t.py"),
             "is reserved", *needles)


def test_the_same_names_are_refused_as_secret_references_and_in_a_file(capsys, tmp_path):
    one_line(*cli(capsys, "render", "slurm", "--secret-env", "APPTAINERENV_RANK"), "sets RANK")
    job = tmp_path / "job.yaml"
    job.write_text("env:\n  SRUN_CPUS_PER_TASK: '64'\n")
    one_line(*cli(capsys, "render", "slurm", "-f", str(job)), "SRUN_CPUS_PER_TASK is reserved", "cpus_per_task")


def test_ordinary_apptainer_variables_and_ld_library_path_still_render(capsys):
    code, out, err = cli(capsys, "render", "slurm", "--container", "apptainer", "-e", "APPTAINERENV_HF_HOME=/hf",
                         "-e", "LD_LIBRARY_PATH=/opt/nccl/lib", "--", "python", "t.py")
    assert code == 0, err
    assert "export APPTAINERENV_HF_HOME=/hf" in out and "export LD_LIBRARY_PATH=/opt/nccl/lib" in out


# ------------------------------------------------------------------------------- secrets in error lines

TOKEN = "hf_live_abc123"


@pytest.mark.parametrize("args, needle", [
    (["--secret-env", f"HF_TOKEN={TOKEN}"], "HF_TOKEN=...: the part after '=' must be the name of a Kubernetes"),
    (["--secret-env", f"HF_TOKEN=my-secret:{TOKEN}!"], "HF_TOKEN=...: the part after ':' is not a valid key"),
    (["--secret-env", f"HF_TOKEN={TOKEN}:"], "HF_TOKEN=... has an empty key"),
    (["--secret-env", f"HF_TOKEN:{TOKEN}"], "'HF_TOKEN...' is not a valid environment variable name"),
    (["-e", f"HF_TOKEN:{TOKEN}"], "env entry 'HF_TOKEN...' has no '='"),
    (["-e", f"HF_TOKEN:{TOKEN}=x"], "'HF_TOKEN...' is not a valid environment variable name"),
    (["--secret-env", f"HF_TOKEN:{TOKEN}", "--secret-env", f"HF_TOKEN:{TOKEN}", "-f", "@secret_env: []\n"],
     "--secret-env gives 'HF_TOKEN...' twice"),
    (["-f", f"@env:\n  HF_TOKEN: !!int {TOKEN}\n"], "cannot read the value as !!int"),
    (["-f", f"@env: HF_TOKEN={TOKEN}\n"], "got a string (not shown)"),
])
def test_no_error_line_shows_the_value_of_an_env_entry_or_secret_reference(capsys, tmp_path, args, needle):
    args = list(args)
    for i, a in enumerate(args):
        if a.startswith("@"):
            (tmp_path / "job.yaml").write_text(a[1:])
            args[i] = str(tmp_path / "job.yaml")
    line = one_line(*cli(capsys, "render", "slurm", *args, "--", "python", "t.py"), needle)
    assert TOKEN not in line and "abc123" not in line


def test_a_repeated_flag_name_is_shown_with_its_control_characters_escaped(capsys, tmp_path):
    (tmp_path / "job.yaml").write_text("env: {B: '1'}\n")  # flags merged over a file's env are counted first
    line = one_line(*cli(capsys, "render", "compose", "-f", str(tmp_path / "job.yaml"), "-e", "A\x1b[2J=1",
                         "-e", "A\x1b[2J=2"), "--env gives 'A")
    assert "\x1b" not in line and "\\x1b" in line


# --------------------------------------------------------------------- credentials in a container image


@pytest.mark.parametrize("image", ["https://user:s3cr3t@reg.example/x.sif", "https://s3cr3t@reg.example/x.sif"])
def test_a_container_image_url_with_credentials_is_refused(capsys, image):
    line = one_line(*cli(capsys, "render", "slurm", "--container", "apptainer", "--container-image", image,
                         "--", "python", "t.py"), "carries credentials", "registry login")
    assert "s3cr3t" not in line


def test_a_container_image_url_without_credentials_still_renders(capsys):
    code, out, err = cli(capsys, "render", "slurm", "--container", "apptainer", "--container-image",
                         "https://reg.example/x.sif", "--", "python", "t.py")
    assert code == 0 and "apptainer exec https://reg.example/x.sif" in out, err


# ----------------------------------------------------------------------------------- non-ASCII image tags


@pytest.mark.parametrize("args", [["render", "pytorchjob", "--image", "pytorch/pytorch:tägé"],
                                  ["render", "slurm", "--container", "pyxis", "--container-image",
                                   "docker://pytorch/pytorch:tägé", "--", "python", "t.py"]])
def test_an_image_tag_with_non_ascii_letters_is_refused(capsys, args):
    one_line(*cli(capsys, *args), "tägé", "image reference")


# -------------------------------------------------------------------- suggested commands are shell words


def test_the_suggested_mkdir_runs_no_command_substitution(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(*cli(capsys, "render", "slurm", "-o", "$(touch PWNED)/x", "--", "python", "t.py"),
                    "(mkdir -p '$(touch PWNED)')")
    hint = re.search(r"\((mkdir -p .*)\) or choose", line).group(1)
    subprocess.run(["bash", "-c", hint], cwd=tmp_path, check=True)  # pasting the hint does what it says
    assert sorted(p.name for p in tmp_path.iterdir()) == ["$(touch PWNED)"]


@pytest.mark.parametrize("name, needle", [("my link", "(> 'my link')"), ("-x", "(> ./-x)"),
                                          ("a$(id)", "(> 'a$(id)')")])
def test_the_suggested_redirect_is_one_quoted_word(capsys, tmp_path, monkeypatch, name, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).symlink_to(tmp_path / "elsewhere")
    one_line(*cli(capsys, "render", "slurm", "-o", name, "--", "python", "t.py"), "is a symbolic link", needle)


def test_a_suggested_command_shows_control_characters_as_text(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(*cli(capsys, "render", "slurm", "-o", "a\x1b[2Jb/x", "--", "python", "t.py"),
                    "(mkdir -p 'a\\x1b[2Jb')")
    assert "\x1b" not in line
