"""``ddpctl image build --workdir`` and ``ddpctl image push`` on the real Docker Engine and a real registry
(Debian's docker-registry, tests/support/registry.py): content tags, the requirements layer from a
wheelhouse made here, labels, pushes by digest, and the failures a user meets (denied, registry down, a
requirement pip cannot find, bad input), each one line with the fix and no tag left in the registry."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from itest_helpers import (
    ddpctl,
    make_wheel,
    own_requirements,
    remove_requirements_layer,
    remove_workspace_images,
)


@pytest.fixture
def project(tmp_path, engine):
    """A third-party-style project: its own train.py and a requirement served from a wheelhouse made here."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text("import wsprobe\nprint('probe', wsprobe.VALUE)\n")
    (root / "helper.py").write_text("X = 1\n")
    (root / "requirements.txt").write_text(own_requirements("wsprobe==1.0"))
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"junk")
    (root / ".dockerignore").write_text("secrets.env\n")
    (root / "secrets.env").write_text("TOKEN=1\n")
    house = tmp_path / "wheelhouse"
    make_wheel(house, "wsprobe", "1.0", "VALUE = 42\n")
    yield root, house
    remove_requirements_layer(engine, BASE, root / "requirements.txt")  # a failed push leaves no image leading to it


@pytest.fixture(scope="session")
def base_image(engine):
    try:
        engine.images.get(BASE)
    except Exception:  # noqa: BLE001
        pytest.fail(f"{BASE} is missing: make it with 'make base-image'")
    return BASE


@pytest.fixture
def repo(engine):
    """A unique repository name; every image tagged under it (and its requirements layer) is removed after."""
    name = f"ws-test/{uuid.uuid4().hex[:8]}"
    yield name
    remove_workspace_images(engine, name)


# The Debian base (python3 + pip, 190 MB, made by 'ddpctl image base' before the CPU image) keeps the pushes
# here short; the end-to-end test (test_workspace_e2e.py) pushes the full torch image once.
BASE = "ddpctl/base:bookworm"


def _build(root, house, tag, *extra):
    return ddpctl("image", "build", "--workdir", str(root), "--base", BASE, "--wheelhouse", str(house),
                  "--tag", tag, *extra)


def test_build_is_content_tagged_cached_labelled_and_runs_the_code(engine, base_image, project, repo):
    root, house = project
    first = _build(root, house, repo)
    assert first.returncode == 0, first.stderr
    tag = first.stdout.strip()
    # (the requirements layer may already be cached by another run on this engine: same base, file and wheels)
    assert tag.startswith(f"{repo}:ws-") and "requirements layer ddpctl/workspace-deps:" in first.stderr
    again = _build(root, house, repo)
    assert again.stdout.strip() == tag and "up to date" in again.stderr and "Step " not in again.stderr
    img = engine.images.get(tag)
    assert img.attrs["Config"]["WorkingDir"] == "/workspace"
    assert img.labels["ai.ddpctl.workspace.source"] == str(root)
    # not the requirements layer's purpose, which it would inherit: its job containers are not install containers
    assert img.labels["ddpctl.purpose"] == "workspace"
    assert engine.images.get(f"ddpctl/workspace-deps:{img.labels['ai.ddpctl.workspace.deps-hash']}").labels[
        "ddpctl.purpose"] == "workspace-deps"
    assert "org.opencontainers.image.revision" not in img.labels  # not a git repository
    out = engine.containers.run(tag, ["sh", "-c", "ls -A /workspace; python3 train.py"], remove=True).decode()
    assert out.split() == ["helper.py", "requirements.txt", "train.py", "probe", "42"]  # no cache, no secrets
    (root / "helper.py").write_text("X = 2\n")
    edited = _build(root, house, repo)
    assert edited.returncode == 0 and edited.stdout.strip() != tag
    assert "requirements layer ddpctl/workspace-deps:" in edited.stderr and "is cached" in edited.stderr
    # a git checkout: the commit and the dirty state are labels
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@x")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    (root / "helper.py").write_text("X = 3\n")
    dirty = _build(root, house, repo)
    labels = engine.images.get(dirty.stdout.strip()).labels
    assert len(labels["org.opencontainers.image.revision"]) == 40 and labels["ai.ddpctl.workspace.git-dirty"] == "true"


def test_push_prints_the_digest_and_the_image_pulls_back_by_it(engine, base_image, project, repo, registry):
    root, house = project
    target = f"{registry.address}/{repo}"
    pushed = _build(root, house, target, "--push")
    assert pushed.returncode == 0, pushed.stderr
    pinned = pushed.stdout.strip()
    assert pinned.startswith(f"{target}@sha256:") and len(pinned.split("@sha256:")[1]) == 64
    tag = next(t for t in engine.images.list(name=target)[0].tags)
    assert registry.tags(repo) == [tag.rsplit(":", 1)[1]]
    engine.images.remove(tag)
    engine.images.pull(pinned)  # what a cluster node does
    try:
        assert engine.containers.run(pinned, ["python3", "train.py"], remove=True).decode().split() == ["probe", "42"]
    finally:
        engine.images.remove(pinned)
    # image push of an existing tag: the same digest
    engine.images.pull(pinned).tag(target, "again")
    again = ddpctl("image", "push", f"{target}:again")
    assert again.returncode == 0 and again.stdout.strip() == pinned, again.stderr
    engine.images.remove(f"{target}:again")


def test_push_uses_the_docker_config_credentials_and_is_denied_without(engine, base_image, project, repo,
                                                                       auth_registry, tmp_path):
    root, house = project
    target = f"{auth_registry.address}/{repo}"
    denied = _build(root, house, target, "--push", "--tag", f"{target}:v1")
    assert denied.returncode == 1
    last = denied.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: registry {auth_registry.address} refused the push") and "docker login" in last
    assert auth_registry.tags(repo) == []  # no tag left referenced
    config = auth_registry.docker_config(tmp_path / "docker-config")
    ok = ddpctl("image", "push", f"{target}:v1", env={"DOCKER_CONFIG": str(config)})
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().startswith(f"{target}@sha256:") and auth_registry.tags(repo) == ["v1"]


def test_registry_down_is_one_line_exit_1(engine, base_image, project, repo):
    import registry as reg

    root, house = project
    port = reg.free_port()  # nothing listens there
    out = _build(root, house, f"127.0.0.1:{port}/{repo}", "--push")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot reach registry 127.0.0.1:{port}") and "start the registry" in last


@pytest.mark.engine_exclusive  # compares every image on the engine before and after
def test_a_requirement_pip_cannot_find_is_exit_2_and_leaves_no_image(engine, base_image, project, repo):
    root, house = project
    (root / "requirements.txt").write_text("wsprobe==1.0\nno-such-package-xyz==3\n")
    from ddpctl.images import workspace as ws

    deps = ws.deps_hash(engine.images.get(BASE).id, root / "requirements.txt", ws.PipOptions(wheelhouse=house))
    installers = {"label": f"{ws.LABEL_PURPOSE}={ws.PURPOSE_DEPS}"}
    # (another session's or a killed run's may be there: what counts is that this build left none)
    before = {c["Id"] for c in engine.api.containers(all=True, filters=installers)}
    out = _build(root, house, repo)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: requirement no-such-package-xyz==3 cannot be found") and "--wheelhouse" in last
    # no requirements layer, no partial image of it, no install container (other builds may run on the engine)
    assert not engine.images.list(filters={"label": f"ai.ddpctl.workspace.deps-hash={deps}"}, all=True)
    assert not engine.images.list(name=repo)
    assert not {c["Id"] for c in engine.api.containers(all=True, filters=installers)} - before


@pytest.mark.parametrize("args, match", [
    (["--tag", "Bad Tag"], "is not an image reference"),
    (["--tag", "ws-test/x", "--push"], "--push needs a registry in --tag"),
    (["--requirements", "/nonexistent/req.txt"], "requirements file '/nonexistent/req.txt' does not exist"),
])
def test_bad_input_is_exit_2_before_any_build(engine, project, args, match):
    root, house = project
    out = ddpctl("image", "build", "--workdir", str(root), "--wheelhouse", str(house), *args)
    assert out.returncode == 2 and match in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_two_builds_at_once_make_one_requirements_layer_and_one_image(engine, base_image, project, repo):
    """Two ``image build`` processes started together on a project whose requirements layer is not built yet
    (two jobs started at once from one checkout): one installs the requirements, the other waits for it on this
    host's build lock and finds the layer built, and both print the same image. Without the lock both install,
    the layer gets two ids and the workspace image, tagged by its parent's id, two tags."""
    from concurrent.futures import ThreadPoolExecutor

    root, house = project
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: _build(root, house, repo), range(2)))
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    outs = [(r.stdout, r.stderr) for r in runs]
    tags = {out.strip() for out, _ in outs}
    assert len(tags) == 1, outs
    installs = [err for _, err in outs if "installing requirements.txt on " in err]
    assert len(installs) == 1, [err[-2000:] for _, err in outs]
    other = next(err for _, err in outs if err not in installs)
    assert ("was built by another ddpctl meanwhile" in other or "is cached" in other), other[-2000:]
