"""Hostile workspaces and job files through the CLI: symbolic links leaving the code directory, credential files,
and a job file's ``workspace:`` section asking for a build and a push by itself.

Every refusal: exit code 2, one ``error:`` line naming the entries, nothing on stdout, nothing written, and no
engine contacted (``ddpctl.dockerengine.connect`` is replaced by a tripwire: nothing built, pushed or run). The
accepted cases use ``--dry-run`` (pure: no engine either).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpctl.cli.main import main

REPO = "127.0.0.1:5000/team/proj"


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    """Any engine contact fails the test: the refusals must come before a build, a push or a container."""
    import ddpctl.dockerengine

    def tripwire(*a, **k):
        raise AssertionError("the Docker Engine was contacted")

    monkeypatch.setattr(ddpctl.dockerengine, "connect", tripwire)


def cli(capsys, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with pytest.raises(SystemExit) as exc:
            main(list(args))
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line(code: int, out: str, err: str, *needles: str) -> str:
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "model.py").write_text("X = 1\n")
    return root


def commands(root: Path) -> list[list[str]]:
    """Every way a workspace is read: image build, render --push (dry run and real), up --bake (dry run and real)."""
    run = ["--", "python", "train.py"]
    return [["image", "build", "--workdir", str(root), "--tag", REPO],
            ["render", "pytorchjob", "--workdir", str(root), "--push", REPO, "--dry-run", *run],
            ["render", "slurm", "--container", "pyxis", "--workdir", str(root), "--push", REPO, *run],
            ["up", "--workdir", str(root), "--bake", "--dry-run", *run],
            ["up", "--workdir", str(root), "--bake", *run]]


OUTSIDE_LINKS = [
    ("file", lambda root, sec: os.symlink(sec, root / "data.txt")),
    ("dir", lambda root, sec: os.symlink(sec.parent, root / "hostdir")),
    ("chain", lambda root, sec: (os.symlink(sec, root / "pkg" / "b"), os.symlink("pkg/b", root / "a"))),
    ("relative", lambda root, sec: os.symlink("../secret.txt", root / "up.txt")),
    ("dangling", lambda root, sec: os.symlink("/nonexistent/ddpctl", root / "gone")),
]


@pytest.mark.parametrize("kind,make", OUTSIDE_LINKS, ids=[k for k, _ in OUTSIDE_LINKS])
def test_a_link_leaving_the_workspace_is_refused_by_every_command(capsys, tmp_path, kind, make):
    root = project(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    make(root, secret)
    for args in commands(root):
        line = one_line(*cli(capsys, *args, cwd=tmp_path), "symbolic links that leave it")
        assert "->" in line, line


def test_links_inside_the_workspace_are_kept_as_links_and_dockerignore_can_drop_an_outside_one(capsys, tmp_path):
    root = project(tmp_path)
    os.symlink("pkg/model.py", root / "alias.py")
    os.symlink(root / "pkg", root / "pkglink")  # absolute, but inside
    os.symlink("/etc", root / "etc")
    (root / ".dockerignore").write_text("etc\n")
    code, out, err = cli(capsys, "render", "pytorchjob", "--workdir", str(root), "--push", REPO, "--dry-run",
                         "--", "python", "train.py")
    assert code == 0, err
    assert "alias.py" in out and "pkglink" in out and "etc" not in out.split("from:")[1].split("\n")[0]
    from ddpctl.images import workspace as ws
    from ddpctl.images.workspace_build import code_context

    got = ws.scan(root)
    assert {f.rel: f.link for f in got.files if f.link} == {"alias.py": "pkg/model.py", "pkglink": "pkg"}
    import tarfile

    with tarfile.open(fileobj=code_context(got, "base:1", {}), mode="r") as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert links == {"code/alias.py": "pkg/model.py", "code/pkglink": "pkg"}


CREDENTIALS = [".env", "prod.env", "deploy/id_rsa", "id_ed25519", ".netrc", ".docker/config.json", ".aws/credentials",
               ".config/gcloud/application_default_credentials.json", ".ssh/config", ".pypirc", ".git-credentials",
               "tls/server.key", "keys/client.pem", "cert.p12"]


@pytest.mark.parametrize("rel", CREDENTIALS)
def test_a_credential_file_is_refused_unless_dockerignore_leaves_it_out_or_the_flag_allows_it(capsys, tmp_path, rel):
    root = project(tmp_path)
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nxyz\n" if rel.endswith(".pem") else "secret\n")
    for args in commands(root):
        one_line(*cli(capsys, *args, cwd=tmp_path), "look like credentials", rel, "--allow-credential-files")
    # a '!' exception in the workspace's own .dockerignore does not allow it: only the command line does
    (root / ".dockerignore").write_text(f"!{rel}\n")
    one_line(*cli(capsys, *commands(root)[1]), "look like credentials")
    dry = commands(root)[1]
    code, out, err = cli(capsys, *dry, "--allow-credential-files")
    assert code == 2  # '--allow-credential-files' after '--' is a command word: the flag goes before it
    code, out, err = cli(capsys, *dry[:-3], "--allow-credential-files", *dry[-3:])
    assert code == 0, err
    assert f"credentials:  {rel}" in out
    (root / ".dockerignore").write_text(f"{rel}\n")
    code, out, err = cli(capsys, *dry)
    assert code == 0, err
    assert "left out:" in out and rel.split("/")[0] in out.split("left out:")[1]


def test_a_certificate_pem_and_an_env_example_are_not_credentials(capsys, tmp_path):
    root = project(tmp_path)
    (root / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nxyz\n")
    (root / ".env.example").write_text("TOKEN=\n")
    code, out, err = cli(capsys, *commands(root)[1])
    assert code == 0, err


def test_the_credential_flag_without_a_build_is_refused(capsys, tmp_path):
    one_line(*cli(capsys, "render", "compose", "--allow-credential-files"), "--allow-credential-files", "--push")
    one_line(*cli(capsys, "image", "build", "--allow-credential-files"), "--allow-credential-files", "--workdir")


def test_a_job_file_alone_cannot_build_or_push(capsys, tmp_path):
    root = project(tmp_path)
    job = root / "job.yaml"
    job.write_text(f"workspace: {{dir: ., repository: '{REPO}'}}\ncommand: [python, train.py]\n")
    for target in ("pytorchjob", "trainjob", "compose"):
        one_line(*cli(capsys, "render", target, "-f", str(job)), "asks to build", "push it to", f"--push {REPO}")
    one_line(*cli(capsys, "render", "slurm", "--container", "pyxis", "-f", str(job), "-o", str(tmp_path / "o.sh")),
             "asks to build")
    assert not (tmp_path / "o.sh").exists()
    one_line(*cli(capsys, "up", "-f", str(job)), "asks to build", "--bake")
    one_line(*cli(capsys, "up", "-f", str(job), "--dry-run"), "asks to build", "--bake")
    # asked for on the command line: it goes ahead (a dry run here)
    code, out, err = cli(capsys, "render", "pytorchjob", "-f", str(job), "--push", REPO, "--dry-run")
    assert code == 0 and f"would push:  {REPO}:ws-<content hash>" in out, err


REQUIREMENTS = [  # (requirements file text, needle of the refusal)
    ("-ihttps://evil.example/simple\n", "would replace ddpctl's own index"),
    ("torch --index-url=https://evil.example/simple\n", "would replace ddpctl's own index"),
    ("--extra-index=https://evil.example/simple\n", "would add an index"),  # an optparse prefix, as pip reads it
    ("numpy \\\n  -i https://evil.example/simple\n", "would replace ddpctl's own index"),  # a continued line
    ("--no-index\n", "index choice"),
    ("-f/tmp/wheels\n", "--wheelhouse"),
    ("--find-links https://evil.example/links\n", "--wheelhouse"),
    ("-c constraints.txt\n", "constraints file"),
    ("-rother.txt\n", "another file"),
    ("-e .\n", "local directory"),
    ("./pkg\n", "local path"),
    ("/abs/pkg.whl\n", "local path"),
    ("pkg.whl\n", "local path"),
    ("pkg @ file:///etc/passwd\n", "cannot reach"),
    ("pkg @ https://user:pw@host.example/p.whl\n", "credentials"),
    ("--trusted-host evil.example\n", "TLS"),
    ("--use-feature=fast-deps\n", "not allowed"),
    ("--only\n", "ambiguous"),
]


@pytest.mark.parametrize("text,needle", REQUIREMENTS, ids=[t.split()[0][:30] for t, _ in REQUIREMENTS])
def test_a_requirements_file_may_not_change_the_index_or_name_local_files(capsys, tmp_path, text, needle):
    root = project(tmp_path)
    (root / "requirements.txt").write_text(text)
    for args in commands(root):
        line = one_line(*cli(capsys, *args, cwd=tmp_path), "requirements.txt line 1", needle)
        assert "pw@" not in line  # a credential in the file is not repeated


def test_the_dry_run_says_which_index_and_options_pip_uses_without_the_password(capsys, tmp_path):
    root = project(tmp_path)
    (root / "requirements.txt").write_text("--pre\nnumpy>=1.26 --hash=sha256:" + "a" * 64 + "\npkg @ https://h.example/p.whl\n")
    args = commands(root)[1]
    code, out, err = cli(capsys, *args[:-3], "--index-url", "https://me:hunter2@idx.example/simple", *args[-3:])
    assert code == 0, err
    assert "pip:          index https://****@idx.example/simple, options from the file: --pre" in out
    assert "hunter2" not in out + err and "me:" not in out + err
    code, out, err = cli(capsys, *args[:-3], "--index-url", "ftp://me:hunter2@x/", *args[-3:])
    one_line(code, out, err, "--index-url")
    assert "hunter2" not in err


def test_a_dry_run_push_without_a_registry_host_refuses_like_the_real_run(capsys, tmp_path):
    root = project(tmp_path)
    for extra in (["--dry-run"], []):
        one_line(*cli(capsys, "render", "pytorchjob", "--workdir", str(root), "--push", "team/proj", *extra,
                      "--", "python", "train.py"), "names no registry")


def test_the_ddp_train_image_refuses_an_index_url_with_credentials(capsys, tmp_path):
    """The ddp-train image's first stage takes the index as a build argument (kept in the cache image's
    history by the legacy builder): credentials are refused before anything is built."""
    code, out, err = cli(capsys, "image", "build", "--cpu", "--index-url", "https://me:hunter2@idx.example/simple",
                         "--tag", "ddpctl/never-built:x", cwd=tmp_path)
    line = one_line(code, out, err, "carries credentials")
    assert "hunter2" not in line and "--wheelhouse" in line
