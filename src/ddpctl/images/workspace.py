"""Workspace images, as pure values: which files of a user's directory go into the image, the content hash
that names the image, the code layer's Dockerfile and the git labels.

A workspace image is a thin layer on a torch image (by default the ddp-train image): the requirements
installed with pip in a layer of their own (an image tagged ``ddpctl/workspace-deps:<hash>``, reused while
the base, the requirements file and the pip options are the same; made by :mod:`ddpctl.images.workspace_requirements`), then
the directory's files copied to ``/workspace`` (links and credential files: :mod:`ddpctl.images.workspace_tree`). The final tag's version is a hash of the requirements layer's id and of every copied file
(path, executable bit, content), so the same tree gives the same tag and an unchanged tree builds nothing.
No I/O here but reading the directory, the requirements file and ``git``'s view of the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ddpctl import rules
from ddpctl.errors import UsageError

WORKSPACE = "/workspace"
DEPS_REPO = "ddpctl/workspace-deps"
DEFAULT_REPO_PREFIX = "ddpctl-workspace"

LABEL_WS_HASH = "ai.ddpctl.workspace.hash"
LABEL_WS_DEPS = "ai.ddpctl.workspace.deps-hash"
LABEL_WS_SOURCE = "ai.ddpctl.workspace.source"
LABEL_GIT_COMMIT = "org.opencontainers.image.revision"
LABEL_GIT_DIRTY = "ai.ddpctl.workspace.git-dirty"
# what an image or container of ddpctl's is for: the requirements layer and the container that installs it say
# PURPOSE_DEPS; a workspace image (built on the layer, whose labels it inherits) says PURPOSE_WORKSPACE, and so
# do the job containers that run it
LABEL_PURPOSE = "ddpctl.purpose"
PURPOSE_DEPS = "workspace-deps"
PURPOSE_WORKSPACE = "workspace"

# Never part of the image: version control, virtualenvs, caches, and what ddpctl itself writes in a directory
# (bench reports, the ddp-train image's build stage). A .dockerignore in the directory adds to these.
DEFAULT_IGNORE = (".git", ".hg", ".svn", "**/__pycache__", "**/*.pyc", "**/.pytest_cache", "**/.mypy_cache",
                  "**/.ruff_cache", "**/.tox", "**/.ipynb_checkpoints", ".venv", "venv", "bench-report",
                  "build/image")


@dataclass(frozen=True)
class SourceFile:
    rel: str  # posix path relative to the workspace directory
    path: Path
    executable: bool
    size: int
    link: str | None = None  # a symbolic link inside the workspace: its target, relative to its directory


@dataclass(frozen=True)
class Workspace:
    """The directory as it goes into the image."""

    root: Path
    files: tuple[SourceFile, ...]
    requirements: Path | None
    left_out: tuple[str, ...] = ()  # credential-looking files DIR/.dockerignore leaves out
    credentials: tuple[str, ...] = ()  # credential-looking files taken (--allow-credential-files)

    def digest(self) -> str:
        """sha256 over every file's path, executable bit and content (sorted by path)."""
        h = hashlib.sha256()
        for f in self.files:
            if f.link is not None:
                h.update(f"{f.rel}\0link\0{f.link}\0".encode())
                continue
            h.update(f"{f.rel}\0{int(f.executable)}\0{f.size}\0".encode())
            with open(f.path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        return h.hexdigest()

    def entries(self) -> list[str]:
        """Top-level Python files (the scripts torchrun can start)."""
        return [f.rel for f in self.files if "/" not in f.rel and f.rel.endswith(".py") and f.link is None]


def _virtualenv_dirs(root: Path) -> list[str]:
    """Directories holding a virtualenv (a ``pyvenv.cfg``), whatever their name, up to two levels down."""
    out = []
    for cfg in [*root.glob("*/pyvenv.cfg"), *root.glob("*/*/pyvenv.cfg")]:
        out.append(cfg.parent.relative_to(root).as_posix())
    return out


def read_dockerignore(root: Path) -> list[str]:
    """The patterns of DIR/.dockerignore (comments and blank lines dropped), or none."""
    path = root / ".dockerignore"
    if not path.is_file():
        return []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path} ({exc.__class__.__name__})", "fix its permissions or remove it") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def scan(directory: str | Path, requirements: str | Path | None = None, *,
         allow_credentials: bool = False) -> Workspace:
    """The files of ``directory`` that go into the image, with the checks a user gets one-line errors for
    (links leaving the directory and credential files: :mod:`ddpctl.images.workspace_tree`)."""
    root = Path(directory).expanduser()
    if not root.exists():
        raise UsageError(f"workspace directory {str(directory)!r} does not exist",
                         "pass the directory that holds your train.py, e.g. --workdir .")
    if not root.is_dir():
        raise UsageError(f"--workdir {str(directory)!r} is not a directory",
                         "pass the directory that holds your train.py, e.g. --workdir .")
    root = root.resolve()
    if not os.access(root, os.R_OK | os.X_OK):
        raise UsageError(f"workspace directory {root} is not readable", "fix its permissions (chmod u+rx)")
    from docker.utils.build import PatternMatcher

    from ddpctl.images import workspace_tree

    patterns = [*DEFAULT_IGNORE, *_virtualenv_dirs(root), *read_dockerignore(root)]
    tree = workspace_tree.walk(root, PatternMatcher(patterns), skip=frozenset({".dockerignore"}))
    workspace_tree.check(root, tree, allow_credentials=allow_credentials)
    files = [SourceFile(rel, path, link is None and bool(st.st_mode & 0o111), 0 if link else st.st_size, link)
             for rel, path, link, st in tree.entries]
    ws = Workspace(root, tuple(sorted(files, key=lambda f: f.rel)), _requirements(root, requirements),
                   tuple(tree.left_out), tuple(tree.credentials))
    if not ws.entries():
        raise UsageError(f"workspace directory {root} has no training entry (no Python file at its top level)",
                         "put the script torchrun starts (e.g. train.py) directly in that directory")
    return ws


def excluded_lines(source: Workspace, indent: str = "") -> list[str]:
    """What a build says about credential-looking files: those DIR/.dockerignore left out, those taken."""
    out = []
    if source.left_out:
        out.append(f"{indent}left out:     {', '.join(source.left_out)} (credential-looking, by .dockerignore)")
    if source.credentials:
        out.append(f"{indent}credentials:  {', '.join(source.credentials)} go into the image "
                   "(--allow-credential-files)")
    return out


def _requirements(root: Path, requirements: str | Path | None) -> Path | None:
    """The requirements file: the one given, else DIR/requirements.txt when it exists, else none."""
    if requirements is None:
        default = root / "requirements.txt"
        if not default.exists():
            return None
        if not default.resolve().is_relative_to(root):
            raise UsageError(f"{default} is a symbolic link that leaves the workspace",
                             "copy the requirements file into the directory, or pass it with --requirements")
        path = default
    else:
        path = Path(requirements).expanduser()
        if path.is_dir():
            raise UsageError(f"requirements file {str(requirements)!r} is a directory",
                             "pass the path of a pip requirements file, e.g. --requirements requirements.txt")
        if not path.is_file():
            raise UsageError(f"requirements file {str(requirements)!r} does not exist",
                             "pass the path of a pip requirements file, e.g. --requirements requirements.txt")
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read requirements file {path} ({exc.strerror})",
                         "fix its permissions (chmod u+r) or pass another with --requirements") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read requirements file {path} (not UTF-8 text)",
                         "save it as UTF-8 text, one requirement per line") from None
    from ddpctl.images import requirements_file

    requirements_file.check(path, text)
    return path.resolve()


# ------------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class PipOptions:
    """Where pip finds the requirements: the same options as ``ddpctl image build`` (offline wheelhouse,
    index mirror, its CA bundle)."""

    wheelhouse: Path | None = None
    index_url: str | None = None
    ca_file: Path | None = None


def deps_hash(base_id: str, requirements: Path | None, pip: PipOptions | None = None) -> str:
    """What the requirements layer is made of, as Docker's own cache keys a step: the base image id and the
    requirements file's text (its selection options, ``--pre``, ``--only-binary`` and the rest, are part of it).
    Not where pip found the wheels (``pip``: --wheelhouse, --index-url and its CA, a wheelhouse made on the
    host): the same file on the same base installs the same thing, so a later command reuses the layer whichever
    source it names. No credential of an index URL can reach the key."""
    doc = {"base": base_id, "requirements": requirements.read_text() if requirements else None}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def code_dockerfile(parent: str, labels: dict[str, str] | None = None) -> str:
    """The code layer: the workspace files at /workspace, the working directory there, the labels in one step
    (the legacy builder makes one step, a container and a commit, per label passed through its API)."""
    text = f"FROM {parent}\nCOPY code/ {WORKSPACE}/\nWORKDIR {WORKSPACE}\n"
    if labels:
        text += "LABEL " + " ".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items())) + "\n"
    return text


def default_repository(root: Path) -> str:
    """``ddpctl-workspace/<directory name>`` in the characters a repository name allows."""
    name = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-") or "workspace"
    return f"{DEFAULT_REPO_PREFIX}/{name[:60]}"


def split_ref(ref: str) -> tuple[str, str | None]:
    """(repository, tag or None) of an image reference; a digest reference is refused."""
    if "@" in ref:
        raise UsageError(f"{ref!r} names a digest", "give a repository (REGISTRY/NAME) or REPOSITORY:TAG to build to")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag
    return ref, None


def check_ref(ref: str, flag: str) -> str:
    try:
        return rules.image_ref(ref)
    except rules.RuleError as exc:
        raise UsageError(f"{flag} {ref!r} is not an image reference ({exc.problem})",
                         "pass e.g. registry.example:5000/team/project or team/project:v1") from None


def workspace_tag(repository: str, tag: str | None, content: str) -> str:
    """The image reference: REPO:<tag> when a tag was given, else REPO:ws-<content hash>."""
    return f"{repository}:{tag or 'ws-' + content[:16]}"


def registry_of(repository: str) -> str | None:
    """The registry host of a repository name, None for Docker Hub names (no '.', ':' or localhost first)."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def git_labels(root: Path) -> dict[str, str]:
    """Commit and dirty state of the git repository holding ``root`` (nothing when it is not in one)."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "--verify", "-q", "HEAD")
        if head.returncode != 0:
            return {}
        status = git("status", "--porcelain", "--untracked-files=normal", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {LABEL_GIT_COMMIT: head.stdout.strip(),
            LABEL_GIT_DIRTY: "true" if status.returncode != 0 or status.stdout.strip() else "false"}
