"""What a workspace's requirements file may say, read the way pip reads it (pure).

pip reads a requirements file line by line: a ``\\`` at the end joins the next line, ``#`` after whitespace
starts a comment, and each line splits at the first space-separated word that starts with ``-``: the words
before are a requirement, the rest are options parsed by :mod:`optparse` (so ``-ihttps://x``,
``--index-url=x`` and an unambiguous prefix such as ``--extra-index=x`` are all options). This module parses
with the same rules and the same option table (pip 26's ``req_file``), then allows:

- requirements by name (``torch``, ``numpy>=1.26``, ``pkg[extra]; python_version>'3.9'``) and remote direct
  references (``pkg @ https://...``, ``git+https://...``), with no credentials in the URL (the file is copied
  with the workspace);
- ``--hash`` after a requirement; the selection options ``--pre``, ``--prefer-binary``, ``--only-binary``,
  ``--no-binary``, ``--require-hashes``, ``--no-require-hashes``, ``--all-releases``, ``--only-final``.

Everything else is refused with the line and the way to say it on ddpctl's command line: the index options
(``-i``, ``--index-url``, ``--extra-index-url``, ``--no-index``) would silently replace ``--index-url``,
``-f``/``--find-links`` is ``--wheelhouse``, ``--trusted-host`` turns TLS checks off (``--ca-file``), and
local paths, ``file:`` URLs, ``-r``, ``-c`` and ``-e`` name files the image build cannot see.
"""

from __future__ import annotations

import optparse
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ddpctl.errors import UsageError

_COMMENT = re.compile(r"(^|\s+)#.*$")
_NAME = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[^\]]*\])?\s*(.*)$", re.S)
_DIRECT = re.compile(r"^@\s*(\S+)\s*(;.*)?$", re.S)
_VERSION = re.compile(r"^(\(|~=|==|!=|<=|>=|<|>|===|;|$)")
_ARCHIVE = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tar", ".tar.lz")
_REMOTE = re.compile(r"^(?:(?:git|hg|svn|bzr)\+)?(?:https?)://", re.I)

ALLOWED = {"pre": "--pre", "prefer_binary": "--prefer-binary", "require_hashes": "--require-hashes",
           "no_require_hashes": "--no-require-hashes", "only_binary": "--only-binary",
           "no_binary": "--no-binary", "all_releases": "--all-releases", "only_final": "--only-final"}
_REFUSED = {
    "index_url": "would replace ddpctl's own index: pass --index-url on the command line instead",
    "extra_index_urls": "would add an index ddpctl does not show: pass --index-url on the command line instead",
    "no_index": "would replace ddpctl's own index choice: pass --wheelhouse on the command line instead",
    "find_links": "names wheels the image build cannot see: pass them with --wheelhouse instead",
    "trusted_host": "turns off pip's TLS checks for a host: pass the index's CA with --ca-file instead",
    "requirements": "names another file, which the image build cannot see: list its requirements here",
    "constraints": "names a constraints file, which the image build cannot see: pin versions here instead",
    "editables": "names a local directory, which the image build cannot see: put the package in the workspace "
                 "or build a wheel into --wheelhouse",
    "features_enabled": "changes how pip resolves: leave pip's features to the image",
    "config_settings": "passes settings to a build backend: build the wheel into --wheelhouse instead",
}


def _parser() -> optparse.OptionParser:
    """pip's requirements-file option table (values taken, not acted on)."""
    p = optparse.OptionParser(add_help_option=False)
    value = [(("-i", "--index-url", "--pypi-url"), "index_url"), (("--extra-index-url",), "extra_index_urls"),
             (("-c", "--constraint"), "constraints"), (("-r", "--requirement"), "requirements"),
             (("-e", "--editable"), "editables"), (("-f", "--find-links"), "find_links"),
             (("--no-binary",), "no_binary"), (("--only-binary",), "only_binary"),
             (("--all-releases",), "all_releases"), (("--only-final",), "only_final"),
             (("--trusted-host",), "trusted_host"), (("--use-feature",), "features_enabled"),
             (("--hash",), "hashes"), (("-C", "--config-settings"), "config_settings")]
    for names, dest in value:
        p.add_option(*names, dest=dest, action="append")
    for name, dest in (("--no-index", "no_index"), ("--prefer-binary", "prefer_binary"), ("--pre", "pre"),
                       ("--require-hashes", "require_hashes"), ("--no-require-hashes", "no_require_hashes")):
        p.add_option(name, dest=dest, action="store_true")

    def fail(msg: str) -> None:
        raise ValueError(msg)

    p.error = fail  # type: ignore[method-assign]
    p.exit = lambda status=0, msg=None: fail(msg or "bad option")  # type: ignore[method-assign]
    return p


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) after pip's joining of ``\\`` continuations and its comment stripping."""
    out, joined, first = [], [], None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.endswith("\\") or _COMMENT.match(line):
            if _COMMENT.match(line):
                line = " " + line
            if joined:
                joined.append(line)
                out.append((first, "".join(joined)))
                joined = []
            else:
                out.append((n, line))
        else:
            if not joined:
                first = n
            joined.append(line.strip("\\"))
    if joined:
        out.append((first, "".join(joined)))
    return [(n, _COMMENT.sub("", line).strip()) for n, line in out if _COMMENT.sub("", line).strip()]


def split_line(line: str) -> tuple[str, str]:
    """pip's ``break_args_options``: the words before the first one starting with '-', and the rest."""
    tokens = line.split(" ")
    for i, token in enumerate(tokens):
        if token.startswith("-"):
            return " ".join(tokens[:i]), " ".join(tokens[i:])
    return line, ""


def redact(url: str) -> str:
    """``url`` with any user name and password replaced by ``****``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.username is None and parts.password is None and "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"****@{host}"))


_USERINFO = re.compile(r"(://)[^/@\s]*@")


def shown(text: str) -> str:
    """``text`` with the user name and password of every URL in it hidden (for messages)."""
    return repr(_USERINFO.sub(r"\1****@", text))


def _check_requirement(req: str) -> str | None:
    """Why ``req`` may not be in the file, or None."""
    if _REMOTE.match(req):
        url = req.split("; ", 1)[0].strip()  # pip: 'URL ; marker'
        if any(c.isspace() for c in url):
            return "is not one URL (a URL line holds the URL and at most '; marker')"
        return None if "@" not in urlsplit(url.split("#", 1)[0]).netloc else "has credentials in its URL"
    m = _NAME.match(req)
    direct = _DIRECT.match(m.group(3).strip()) if m else None
    if m is None or (not direct and ("/" in req or "\\" in req or req.lower().endswith(_ARCHIVE))) \
            or req.startswith("."):
        return "is a local path or not a requirement: the image build cannot see this machine's files"
    rest = m.group(3).strip()
    if direct:
        url = direct.group(1)
        if not _REMOTE.match(url):
            return "refers to a file (or a URL scheme) the image build cannot reach"
        if "@" in urlsplit(url).netloc:
            return "has credentials in its URL (the file goes into the image with the workspace)"
        return None
    if not _VERSION.match(rest):
        return "is not a requirement pip can read (NAME[extras] [version] [; marker])"
    return None


def check(path: Path, text: str) -> tuple[str, ...]:
    """Refuse what the file may not say (one line naming it); returns the selection options it uses."""
    parser, used = _parser(), []
    for n, line in logical_lines(text):
        args, opts = split_line(line)
        where = f"{path} line {n}"
        if args:
            problem = _check_requirement(args)
            if problem:
                raise UsageError(f"{where}: {shown(args)} {problem}", "list packages by name (local wheels go in "
                                 "--wheelhouse, a private index in --index-url)")
        try:
            values, extra = parser.parse_args(shlex.split(opts), optparse.Values())
        except ValueError as exc:
            raise UsageError(f"{where}: pip cannot read {shown(opts)} ({exc})", "fix the line") from None
        if extra:
            raise UsageError(f"{where}: {shown(opts)} mixes options with a requirement", "put one requirement per "
                             "line, its options (--hash) after it")
        for dest, value in vars(values).items():
            if value in (None, False):
                continue
            if dest in _REFUSED:
                raise UsageError(f"{where}: {shown(opts)} is not allowed in a workspace requirements file: it "
                                 f"{_REFUSED[dest].split(': ')[0]}", _REFUSED[dest].split(": ", 1)[1])
            if dest in ("no_binary", "only_binary") and any(v.startswith("-") for v in value):
                raise UsageError(f"{where}: {shown(opts)}: {ALLOWED[dest]} takes :all:, :none: or package names",
                                 f"write e.g. '{ALLOWED[dest]}=:all:'")
            if dest == "hashes" and not args:
                raise UsageError(f"{where}: --hash belongs after a requirement", "write 'NAME==VERSION --hash=...'")
            if dest in ALLOWED and ALLOWED[dest] not in used:
                used.append(ALLOWED[dest])
    return tuple(used)


def source_references(text: str) -> list[tuple[int, str]]:
    """(line, requirement) of each direct reference that is not a wheel (``git+https://...``, ``pkg @
    https://.../pkg.tar.gz``): pip builds it to learn its dependencies, running its build code."""
    out = []
    for n, line in logical_lines(text):
        req = split_line(line)[0].strip()
        m = _NAME.match(req)
        direct = _DIRECT.match(m.group(3).strip()) if m else None
        url = direct.group(1) if direct else req.split("; ", 1)[0].strip() if _REMOTE.match(req) else None
        if url and not urlsplit(url).path.lower().endswith(".whl"):
            out.append((n, req))
    return out


def options(path: Path) -> tuple[str, ...]:
    """The selection options a (checked) requirements file uses."""
    return check(path, path.read_text())


_NOT_FOUND = re.compile(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                        r"requirement)\s+(\S+)")


def raise_pip_failure(lines: list[str], what: str, code: int) -> None:
    """pip failed in the build: a requirement it cannot find is the user's to fix (exit 2), the rest exit 1."""
    from ddpctl.errors import EngineError

    missing = next((m.group(1) for line in lines for m in [_NOT_FOUND.search(line)] if m), None)
    if missing:
        raise UsageError(f"requirement {missing} cannot be found by pip (the {what} was not built)",
                         f"add its wheel to --wheelhouse ({shlex.join(['pip', 'download', '-d', 'DIR', missing])}),"
                         " pass --index-url, or fix the requirements file")
    last = next((line.strip() for line in reversed(lines) if line.strip()), f"exit code {code}")
    raise EngineError(f"building the {what} failed: pip exited {code} ({last[:200]})", "read the build output above")


def describe(pip, options: tuple[str, ...]) -> str:
    """Which index and options pip uses in the build, credentials hidden (said before every build and dry run)."""
    parts = []
    if pip is not None and pip.index_url:
        parts.append(f"index {redact(pip.index_url)}" + (f" (CA {pip.ca_file})" if pip.ca_file else ""))
    if pip is not None and pip.wheelhouse:
        parts.append(f"wheelhouse {pip.wheelhouse}" + ("" if pip.index_url else " (offline: --no-index)"))
    if not parts:
        parts.append("the base image's pip configuration (default https://pypi.org/simple)")
    if options:
        parts.append("options from the file: " + " ".join(options))
    return ", ".join(parts)
