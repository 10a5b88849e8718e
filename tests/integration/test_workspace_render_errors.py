"""``ddpctl render TARGET --workdir DIR --push REPO`` when something is wrong: one line naming the problem and
the fix, exit 2 for bad input and 1 for the outside world (registry down, push refused), no manifest written,
and no tag in the registry that a failed push left half-made. Real engine, real registry (Debian's
docker-registry: tests/support/registry.py); the image pushed is built on the small Debian base."""

from __future__ import annotations

import os
import uuid

import pytest

from itest_helpers import (
    ddpctl,
    image_ids,
    make_wheel,
    own_requirements,
    remove_requirements_layer,
    remove_workspace_images,
)

BASE = "ddpctl/base:bookworm"


@pytest.fixture
def project(tmp_path, engine):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text("import wsprobe\nprint(wsprobe.VALUE)\n")
    (root / "requirements.txt").write_text(own_requirements("wsprobe==1.0"))
    house = make_wheel(tmp_path / "wheelhouse", "wsprobe", "1.0", "VALUE = 1\n").parent
    yield root, house
    remove_requirements_layer(engine, BASE, root / "requirements.txt")  # a failed push leaves no image leading to it


@pytest.fixture
def cleanup_repo(engine):
    name = f"ws-err/{uuid.uuid4().hex[:8]}"
    yield name
    remove_workspace_images(engine, name)


def _render(tmp_path, root, house, repo, *extra, target="pytorchjob"):
    out = tmp_path / "out" / "job.yaml"
    out.parent.mkdir(exist_ok=True)
    proc = ddpctl("render", target, "-n", "2", "--image", BASE, "--workdir", str(root), "--wheelhouse", str(house),
                  "--push", repo, "-o", str(out), *extra, "--", "python", "train.py", timeout=600)
    return proc, out


def _one_line_error(proc, code, *words):
    assert proc.returncode == code, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "; " in last, last
    for w in words:
        assert w in last, last
    assert "Traceback" not in proc.stderr
    return last


def test_missing_dir_no_entry_bad_requirements_and_bad_repository_are_exit_2(engine, tmp_path, project):
    root, house = project
    proc, out = _render(tmp_path, tmp_path / "nope", house, "127.0.0.1:5999/x/y")
    _one_line_error(proc, 2, "does not exist", "--workdir")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("no code\n")
    proc, out = _render(tmp_path, tmp_path / "empty", house, "127.0.0.1:5999/x/y")
    _one_line_error(proc, 2, "no training entry", "train.py")
    (root / "requirements.txt").write_bytes(b"\xff\xfe\x00bad")
    proc, out = _render(tmp_path, root, house, "127.0.0.1:5999/x/y")
    _one_line_error(proc, 2, "cannot read requirements file", "not UTF-8")
    proc, out = _render(tmp_path, root, house, "127.0.0.1:5999/x/y", "--requirements", str(tmp_path))
    _one_line_error(proc, 2, "is a directory")
    (root / "requirements.txt").write_text("wsprobe==1.0\n")
    if os.geteuid() != 0:  # root reads any file
        (root / "requirements.txt").chmod(0)
        proc, out = _render(tmp_path, root, house, "127.0.0.1:5999/x/y")
        _one_line_error(proc, 2, "cannot read requirements file")
        (root / "requirements.txt").chmod(0o644)
    proc, out = _render(tmp_path, root, house, "127.0.0.1:5999/Bad Repo")
    _one_line_error(proc, 2, "workspace.repository")
    proc, out = _render(tmp_path, root, house, "127.0.0.1:5999/x/y", "--", "python", "missing.py")
    _one_line_error(proc, 2, "missing.py", "not in the workspace")
    assert not out.exists() and not any(out.parent.iterdir())


def test_a_requirement_pip_cannot_find_is_exit_2_and_nothing_is_rendered(engine, tmp_path, project, cleanup_repo):
    root, house = project
    (root / "requirements.txt").write_text("wsprobe==1.0\nnot-in-the-wheelhouse==2.0\n")
    proc, out = _render(tmp_path, root, house, f"127.0.0.1:5999/{cleanup_repo}")
    _one_line_error(proc, 2, "requirement not-in-the-wheelhouse==2.0 cannot be found", "--wheelhouse")
    assert not out.exists()


def test_registry_down_is_exit_1_and_nothing_is_rendered(engine, tmp_path, project, cleanup_repo):
    import registry as reg

    root, house = project
    port = reg.free_port()
    proc, out = _render(tmp_path, root, house, f"127.0.0.1:{port}/{cleanup_repo}")
    _one_line_error(proc, 1, f"cannot reach registry 127.0.0.1:{port}", "start the registry")
    assert not out.exists()


def test_push_denied_is_exit_1_leaves_no_tag_and_renders_nothing(engine, tmp_path, project, cleanup_repo,
                                                                 auth_registry):
    root, house = project
    proc, out = _render(tmp_path, root, house, f"{auth_registry.address}/{cleanup_repo}", target="trainjob")
    _one_line_error(proc, 1, "refused the push", "docker login")
    assert not out.exists()
    assert auth_registry.tags(cleanup_repo) == []


@pytest.mark.engine_exclusive  # compares every image on the engine before and after
def test_dry_run_builds_pushes_and_writes_nothing(engine, tmp_path, project, registry, cleanup_repo):
    root, house = project
    before = image_ids(engine, all=True)
    proc, out = _render(tmp_path, root, house, f"{registry.address}/{cleanup_repo}", "--dry-run", "--container", "apptainer",
                        target="slurm")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"would build: {registry.address}/{cleanup_repo}:ws-<content hash>")
    assert f"would render: slurm with image {registry.address}/{cleanup_repo}@sha256:" in proc.stdout
    assert not out.exists() and registry.tags(cleanup_repo) == []
    assert image_ids(engine, all=True) == before
