"""Workspace images without an engine: which files go in, the content hash and tag, the requirements and
registry checks, and the one-line messages of a failed push."""

from __future__ import annotations

import os
import subprocess

import pytest

from ddpctl.errors import EngineError, UsageError
from ddpctl.images import workspace as ws
from ddpctl.images.push import push_failure


def _project(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text("X = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    for junk in [".git/config", "pkg/__pycache__/model.cpython-311.pyc", ".venv/bin/python", "bench-report/report.json",
                 "env2/pyvenv.cfg", "env2/lib/x.py"]:
        (root / junk).parent.mkdir(parents=True, exist_ok=True)
        (root / junk).write_text("junk")
    return root


def test_scan_takes_the_code_and_leaves_vcs_virtualenvs_caches_and_reports_out(tmp_path):
    got = ws.scan(_project(tmp_path))
    assert [f.rel for f in got.files] == ["pkg/__init__.py", "pkg/model.py", "run.sh", "train.py"]
    assert {f.rel: f.executable for f in got.files}["run.sh"] is True
    assert got.entries() == ["train.py"]
    assert got.requirements is None


def test_dockerignore_patterns_and_exceptions_are_honoured(tmp_path):
    root = _project(tmp_path)
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_text("x")
    (root / "data" / "keep.bin").write_text("x")
    (root / ".dockerignore").write_text("# data is mounted on the cluster\ndata/*.bin\n!data/keep.bin\n*.sh\n")
    got = [f.rel for f in ws.scan(root).files]
    assert "data/keep.bin" in got and "data/big.bin" not in got and "run.sh" not in got
    assert ".dockerignore" not in got and not any(r.startswith(".git/") for r in got)


def test_the_same_tree_gives_the_same_hash_and_an_edit_or_a_mode_change_another(tmp_path):
    root = _project(tmp_path)
    first = ws.scan(root).digest()
    os.utime(root / "train.py", (1, 1))  # a touch alone changes nothing
    (root / "pkg" / "__pycache__" / "other.pyc").write_text("more junk")
    assert ws.scan(root).digest() == first
    (root / "pkg" / "model.py").write_text("X = 2\n")
    second = ws.scan(root).digest()
    assert second != first
    (root / "train.py").chmod(0o755)
    assert ws.scan(root).digest() != second


def test_tags_are_derived_from_content_unless_given():
    assert ws.workspace_tag("reg:5000/me/p", None, "ab" * 32) == "reg:5000/me/p:ws-" + "ab" * 8
    assert ws.workspace_tag("reg:5000/me/p", "v1", "ab" * 32) == "reg:5000/me/p:v1"
    assert ws.split_ref("127.0.0.1:5000/me/p") == ("127.0.0.1:5000/me/p", None)
    assert ws.split_ref("127.0.0.1:5000/me/p:v2") == ("127.0.0.1:5000/me/p", "v2")
    assert ws.registry_of("127.0.0.1:5000/me/p") == "127.0.0.1:5000"
    assert ws.registry_of("localhost/me") == "localhost" and ws.registry_of("me/p") is None
    with pytest.raises(UsageError, match="digest"):
        ws.split_ref("reg:5000/p@sha256:" + "0" * 64)
    assert ws.default_repository(ws.Path("/x/My Project_2")) == "ddpctl-workspace/my-project-2"


@pytest.mark.parametrize("make, match", [
    (lambda root: root / "nope", "does not exist"),
    (lambda root: (root / "train.py"), "is not a directory"),
    (lambda root: (root / "pkg"), "no training entry"),
])
def test_bad_directories_are_one_line_usage_errors(tmp_path, make, match):
    root = _project(tmp_path)
    (root / "pkg" / "__init__.py").unlink()
    (root / "pkg" / "model.py").rename(root / "pkg" / "model.txt")
    with pytest.raises(UsageError, match=match) as info:
        ws.scan(make(root))
    assert info.value.exit_code == 2 and "\n" not in info.value.message and info.value.fix


def test_requirements_default_given_missing_unreadable_and_local_paths(tmp_path):
    root = _project(tmp_path)
    (root / "requirements.txt").write_text("tqdm==4.0\n")
    assert ws.scan(root).requirements == (root / "requirements.txt").resolve()
    other = tmp_path / "reqs.txt"
    other.write_text("# nothing\n")
    assert ws.scan(root, other).requirements == other.resolve()
    with pytest.raises(UsageError, match="does not exist"):
        ws.scan(root, tmp_path / "missing.txt")
    (root / "requirements.txt").write_text("-e .\n")
    with pytest.raises(UsageError, match="names a local directory"):
        ws.scan(root)
    if os.geteuid() != 0:  # root reads any file
        other.chmod(0)
        with pytest.raises(UsageError, match="cannot read"):
            ws.scan(root, other)


def test_deps_hash_follows_base_and_requirements_not_where_wheels_come_from(tmp_path):
    req = tmp_path / "r.txt"
    req.write_text("a\n")
    house = tmp_path / "wh"
    house.mkdir()
    pip = ws.PipOptions(wheelhouse=house)
    one = ws.deps_hash("sha256:1", req, pip)
    assert one == ws.deps_hash("sha256:1", req, pip)
    assert one != ws.deps_hash("sha256:2", req, pip)
    (house / "a-1-py3-none-any.whl").write_bytes(b"zz")
    # the same file on the same base: the same layer, from a wheelhouse, an index or a host-made wheelhouse
    assert one == ws.deps_hash("sha256:1", req, pip) == ws.deps_hash("sha256:1", req)
    assert one == ws.deps_hash("sha256:1", req, ws.PipOptions(index_url="https://mirror.example/simple"))
    # no hash derives from credentials: a new password (or index) is not a new layer
    with_pw = ws.deps_hash("sha256:1", req, ws.PipOptions(index_url="https://u:pw1@idx.example/simple"))
    assert with_pw == one == ws.deps_hash("sha256:1", req, ws.PipOptions(index_url="https://u:pw2@idx.example/simple"))
    # what the file selects is part of its text: --pre installs other versions, so it is another layer
    req.write_text("a\n--pre\n")
    assert one != ws.deps_hash("sha256:1", req)
    req.write_text("a\nb\n")
    assert one != ws.deps_hash("sha256:1", req)
    from ddpctl.images import workspace_requirements

    assert "--no-index" in workspace_requirements.SCRIPT and "trap 'rm -rf \"$W\"' EXIT" in workspace_requirements.SCRIPT
    assert '[ ! -f "$W/no-index" ] || set -- "$@" --no-index' in workspace_requirements.SCRIPT
    assert ws.code_dockerfile("p:1") == "FROM p:1\nCOPY code/ /workspace/\nWORKDIR /workspace\n"


def test_git_labels_record_commit_and_dirty_state(tmp_path):
    root = _project(tmp_path)
    assert ws.git_labels(root) == {}  # .git here is a junk file, not a repository
    (root / ".git" / "config").unlink()
    (root / ".git").rmdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@x")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert ws.git_labels(root) == {ws.LABEL_GIT_COMMIT: head, ws.LABEL_GIT_DIRTY: "false"}
    (root / "train.py").write_text("print('changed')\n")
    assert ws.git_labels(root)[ws.LABEL_GIT_DIRTY] == "true"


@pytest.mark.parametrize("daemon, problem, fix", [
    ("Get \"https://10.1.2.3:5000/v2/\": http: server gave HTTP response to HTTPS client", "plain HTTP",
     "insecure-registries"),
    ("dial tcp 127.0.0.1:5999: connect: connection refused", "cannot reach registry 127.0.0.1:5999",
     "start the registry"),
    ("unauthorized: authentication required", "refused the push", "docker login"),
    ("denied: requested access to the resource is denied", "refused the push", "docker login"),
])
def test_push_failures_are_said_in_one_line_with_the_fix(daemon, problem, fix):
    host = "10.1.2.3:5000" if "10.1.2.3" in daemon else "127.0.0.1:5999"
    exc = push_failure(f"{host}/me/p:ws-1", daemon)
    assert isinstance(exc, EngineError) and exc.exit_code == 1
    assert problem in exc.problem and fix in exc.fix and "\n" not in exc.message
