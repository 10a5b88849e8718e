"""Image references: Docker (distribution/reference grammar) and Slurm container images."""

from __future__ import annotations

import re
from typing import Any

from ddpctl.rules.base import MAX_IMAGE_LEN, RuleError, text
from ddpctl.rules.hosts import HOST_RE, mask_url_passwords, no_credentials

# -------------------------------------------------------------------------------------------- images

# github.com/distribution/reference (regexp.go): the grammar Docker uses to parse image references.
_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"  # Go's \w is ASCII only: Python's would take 'tägé'
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE_RE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
MAX_IMAGE_NAME_LEN = 255


def _word(value: Any, what: str, example: str, fix: str) -> str:
    """A non-empty string of :func:`text` that never starts with ``-`` (a command line would read an option)."""
    if not isinstance(value, str) or not value:
        raise RuleError(f"{what} must be a non-empty string", f"write e.g. {example}")
    text(value, what=what)
    if value.startswith("-"):
        raise RuleError(f"{what} {value!r} starts with '-' (it would be read as an option)", fix)
    return value


def image_ref(ref: Any) -> str:
    """A Docker image reference: ``[registry[:port]/]path[:tag][@digest]``, lowercase path, name <= 255."""
    fix = "write e.g. pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime or registry.example:5000/team/img@sha256:..."
    ref = _word(ref, "image reference", "pytorch/pytorch:2.13.0", fix)
    m = _IMAGE_RE.fullmatch(ref)
    if not m:
        hint = " (repository names are lowercase)" if ref.lower() != ref and _IMAGE_RE.fullmatch(ref.lower()) else ""
        raise RuleError(f"{ref!r} is not a valid image reference{hint}", fix)
    domain = m.group("domain")
    if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
        # Docker reads a first component without '.' or ':' as part of the path: it must be lowercase.
        if domain != domain.lower():
            raise RuleError(f"{ref!r} is not a valid image reference (repository names are lowercase)", fix)
    if len(m.group("name")) > MAX_IMAGE_NAME_LEN:
        raise RuleError(f"image name of {ref[:40]!r}... is longer than {MAX_IMAGE_NAME_LEN} characters", fix)
    return ref


def container_image(value: Any, runtime: str = "pyxis") -> str:
    """A Slurm container image: ``docker://REF`` (then an :func:`image_ref`), another URI (``oras://``,
    ``library://``, ``docker-daemon:``), a path to an image file, or a pyxis/enroot ``[USER@][REGISTRY#]IMAGE``.

    It is always passed as one quoted word, so any printable text is safe for the shell; what matters is that
    it never starts with ``-`` (``apptainer exec -x`` would read an option) and has no control characters.
    """
    fix = "write e.g. docker://pytorch/pytorch:2.13.0, nvcr.io#nvidia/pytorch:25.08-py3 or /images/train.sif"
    value = _word(value, "container image", "docker://pytorch/pytorch:2.13.0", fix)
    if len(value) > MAX_IMAGE_LEN:
        raise RuleError(f"container image is longer than {MAX_IMAGE_LEN} characters", fix)
    if value.startswith("~"):  # the script passes it as one quoted word: no shell expands the ~ there
        raise RuleError(f"container image '{value[:80]}' starts with '~', which the job script does not expand",
                        "write the image file's absolute path on the nodes, e.g. /home/USER/images/train.sif")
    if value.startswith(("/", "./", "../")):
        return value  # an image file (.sif, .sqsh) or a sandbox directory on the nodes
    scheme, sep, rest = value.partition("://")
    if not sep and value.startswith("docker-daemon:"):
        scheme, rest = "docker-daemon", value[len("docker-daemon:"):]
    elif not sep:
        scheme, rest = "", value
    if scheme in ("http", "https"):
        _url_image(value)
        return value
    try:
        if scheme in ("", "docker", "dockerd", "podman", "docker-daemon", "oras"):
            _enroot_ref(rest)
        elif scheme in ("library", "shub"):
            if not _LIBRARY_RE.fullmatch(rest):
                raise RuleError(f"{rest!r} is not a {scheme}:// reference", "write [HOST/]ENTITY/COLLECTION/NAME[:TAG]")
        else:
            raise RuleError(f"scheme {scheme!r} is not one pyxis/enroot or apptainer reads",
                            "use docker://, dockerd://, podman://, docker-daemon:, oras://, library://, shub://, "
                            "https:// or a path")
    except RuleError as exc:
        shown = mask_url_passwords(value)
        raise RuleError(f"container image {shown!r} is not an image reference ({exc.problem})", fix) from None
    return value


def _url_image(value: str) -> None:
    """An ``http(s)://`` image: a valid host and port, no blanks, and no credentials (they would be in the
    script): the registry's own login keeps them out of it."""
    from urllib.parse import urlsplit

    fix = "write https://HOST/PATH/image.sif"
    shown = mask_url_passwords(value)
    try:
        parts = urlsplit(value)
        host, _port = parts.hostname or "", parts.port  # .port raises on a bad port
    except ValueError:
        raise RuleError(f"container image {shown!r} is not a valid URL", fix) from None
    if not HOST_RE.fullmatch(host) or any(c.isspace() for c in value):
        raise RuleError(f"container image {shown!r} is not an image reference (not a URL with a host)", fix)
    no_credentials(value, parts, "container image", "https://HOST/PATH/image.sif",
                   "the sbatch script would hold them: log in with the registry's own mechanism ('apptainer "
                   "registry login', enroot's .credentials file) and use docker:// or oras://, or download the "
                   "image where the job runs and give its path")


_LIBRARY_RE = re.compile(r"([a-z0-9][a-z0-9._-]*/){0,3}[a-z0-9][a-z0-9._-]*(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?")
_ENROOT_USER = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.\-]{0,63})@(?!sha256:)(.+)", re.S)


def _enroot_ref(rest: str) -> None:
    """``[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]`` (enroot's, which pyxis passes on) or a Docker reference."""
    m = _ENROOT_USER.fullmatch(rest)
    if m and "/" not in m.group(1) and "#" not in m.group(1):
        rest = m.group(2)
    registry, sharp, path = rest.partition("#")
    if sharp:
        if not registry or "/" in registry:
            raise RuleError(f"{registry!r} before '#' is not a registry host", "write REGISTRY#PATH[:TAG]")
        image_ref(f"{registry}/{path}")
    else:
        image_ref(rest)
