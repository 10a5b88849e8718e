"""Which entries of a workspace directory may go into an image: the walk behind
:func:`ddpctl.images.workspace.scan`, with its two refusals (pure; reads only the directory).

- **Symbolic links.** A link whose target (followed to the end) stays inside the directory goes into the image
  as a link, rewritten relative to its own directory so it points at the same entry under /workspace, as
  ``docker build`` sends links (never its target's content in its place). A link that leaves the directory, or
  a dangling one that would, is refused with one line naming it: following it would bake a host file into the
  image. Directory links are links like any other (never followed, never dropped).
- **Credential files.** A file that looks like a credential (``.env``, private keys, ``.netrc``, Docker, cloud
  and SSH credential files; :func:`credential`) is refused unless ``.dockerignore`` leaves it out (it is then
  listed as left out) or the command line passes ``--allow-credential-files``. A job file or the workspace
  itself cannot allow one: a ``!`` exception line in ``.dockerignore`` does not.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from ddpctl.errors import UsageError

ALLOW_FLAG = "--allow-credential-files"

# base names (lower case) of files that hold credentials
_NAMES = frozenset({
    ".env", ".envrc", ".netrc", "_netrc", ".pgpass", ".pypirc", ".git-credentials", ".npmrc", ".boto", ".s3cfg",
    ".vault-token", ".htpasswd", ".dockercfg", "credentials.db", "access_tokens.db", "legacy_credentials",
    "application_default_credentials.json", "kubeconfig", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
    "id_ecdsa_sk", "id_ed25519_sk", "identity",
})
_PATTERNS = ("*.key", "*.p12", "*.pfx", "*.ppk", "*.jks", "*.keystore", "*.env", ".env.*", "*.ovpn")
_EXAMPLES = (".example", ".sample", ".template", ".dist", ".defaults")  # .env.example and friends: no secrets
# directories whose every file is a credential, and files that are one only in their directory
_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker/config.json", ".config/gcloud"})
_KEY_MARK = b"PRIVATE KEY-----"
_SNIFF_BYTES = 4096


def credential(rel: str, path: Path | None = None) -> bool:
    """Does the file ``rel`` (posix, relative to the workspace) look like a credential? ``path``: also look at
    the first bytes for a PEM/OpenSSH private key (a ``.pem`` holding only certificates is not one)."""
    name = rel.rsplit("/", 1)[-1].lower()
    if ".env" in name and name.endswith(_EXAMPLES):
        return False
    if name in _NAMES or any(fnmatch(name, p) for p in _PATTERNS):
        return True
    low = "/" + rel.lower()
    if any(f"/{d}/" in low + "/" for d in _DIRS):
        return True
    if path is not None:
        try:
            with open(path, "rb") as fh:
                head = fh.read(_SNIFF_BYTES)
        except OSError:
            return False
        return head.lstrip().startswith(b"-----BEGIN ") and _KEY_MARK in head
    return False


@dataclass
class Tree:
    """What the walk found: ``(rel, path, link text or None, stat)`` entries that go in, and what it left out."""

    entries: list[tuple[str, Path, str | None, os.stat_result]] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # "rel -> target" of links leaving the directory
    credentials: list[str] = field(default_factory=list)  # credential-looking files that would go in
    left_out: list[str] = field(default_factory=list)  # credential-looking files .dockerignore left out


def _link(root: str, rel: str, path: Path) -> tuple[str | None, str]:
    """(link text inside the image or None when the link leaves ``root``, its text on the host)."""
    text = os.readlink(path)
    resolved = os.path.realpath(path)
    if resolved != root and not resolved.startswith(root.rstrip("/") + "/"):
        return None, text
    return os.path.relpath(resolved, os.path.dirname(os.path.join(root, rel))), text


def walk(root: Path, matcher, *, skip: frozenset[str] = frozenset()) -> Tree:
    """Every entry of ``root`` that ``matcher`` (the .dockerignore rules) keeps, links and credentials sorted
    out; ``skip``: relative paths never taken (``.dockerignore`` itself)."""
    tree = Tree()
    exceptions = any(p.exclusion for p in matcher.patterns)
    top = str(root)
    for dirpath, dirnames, filenames in os.walk(root, onerror=_walk_error):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            rel, path = rel_dir + d, Path(dirpath) / d
            if path.is_symlink():
                filenames.append(d)  # a directory link is a link: taken (or refused) as one, never followed
            elif matcher.matches(rel) and not exceptions:
                # pruned (unless an exception ('!pattern') could bring something below it back)
                if credential(rel + "/"):
                    tree.left_out.append(rel + "/")
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel, path = rel_dir + name, Path(dirpath) / name
            if rel in skip:
                continue
            if matcher.matches(rel):
                if credential(rel, path if path.is_file() else None):
                    tree.left_out.append(rel)
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                inside, text = _link(top, rel, path)
                if inside is None:
                    tree.outside.append(f"{rel} -> {text}")
                else:
                    tree.entries.append((rel, path, inside, st))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # sockets, fifos: not files an image can hold
            if not os.access(path, os.R_OK):
                raise UsageError(f"{path} in the workspace is not readable",
                                 "fix its permissions, or list it in DIR/.dockerignore")
            if credential(rel, path):
                tree.credentials.append(rel)
            tree.entries.append((rel, path, None, st))
    return tree


def _some(names: list[str], n: int = 5) -> str:
    shown = ", ".join(repr(x) for x in names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def check(root: Path, tree: Tree, *, allow_credentials: bool) -> None:
    """The two refusals, each one line naming the entries."""
    if tree.outside:
        raise UsageError(f"workspace {root} has symbolic links that leave it ({_some(tree.outside)}): their "
                         "targets are host files the image must not take",
                         "copy what the job needs into the directory, or list the links in DIR/.dockerignore")
    if tree.credentials and not allow_credentials:
        raise UsageError(f"workspace {root} holds files that look like credentials ({_some(tree.credentials)}), "
                         "which would be baked into the image", "list them in DIR/.dockerignore (pass "
                         f"secrets with --secret-env instead), or pass {ALLOW_FLAG} if they belong in the image")


def _walk_error(exc: OSError) -> None:
    raise UsageError(f"cannot read {exc.filename} in the workspace ({exc.strerror})",
                     "fix its permissions, or list it in DIR/.dockerignore") from None
