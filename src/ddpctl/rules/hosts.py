"""Host names and host lists: one rule for every place a machine is named (``--hosts``, ``master_addr``,
the hosts of ``--docker-hosts`` / ``docker_hosts`` / ``$DDPCTL_DOCKER_HOSTS``, the addresses derived from
them), and one way to split a list of them."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from ddpctl.rules.base import RuleError

# Patterns are matched with fullmatch (``$`` would also accept a trailing newline).
HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?|\[?[0-9A-Fa-f:]{2,39}\]?")
_SSH_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31}")
_CONTEXT_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.+-]{0,127}")
DOCKER_HOST_SCHEMES = ("unix", "tcp", "ssh")
_URL_PASSWORD = re.compile(r"(://[^/@\s:]*:)[^/@\s]+@")
_URL_TOKEN_USER = re.compile(r"://[^/@\s:]+@")  # https://TOKEN@host: a token as the user name
MASK = "***"


def mask_url_passwords(text: str) -> str:
    """``postgres://u:pw@db/x`` -> ``postgres://u:***@db/x``, ``https://TOKEN@h`` -> ``https://***@h``: the
    password (or the lone user name, often a token) of every URL in ``text`` masked."""
    return _URL_TOKEN_USER.sub(f"://{MASK}@", _URL_PASSWORD.sub(rf"\1{MASK}@", text))


def split_list(text: str) -> list[str]:
    """``a,b`` / ``a, b`` / ``a b`` -> ['a', 'b']: commas and whitespace separate, blanks are dropped."""
    return [v for v in re.split(r"[,\s]+", text) if v]


def host_name(value: str) -> str:
    """A host name (letters, digits, '.', '-'; starting and ending with a letter or digit) or an IP address."""
    if not isinstance(value, str) or not HOST_RE.fullmatch(value):
        raise RuleError(f"{value!r} is not a host name or IP address",
                        "use letters, digits, '.' and '-' (never first), or an IPv4/IPv6 address")
    return value


def docker_host(value: str) -> str:
    """A Docker host as ``--docker-hosts`` takes it: ``unix:///PATH``, ``tcp://HOST[:PORT]``,
    ``ssh://[USER@]HOST[:PORT]`` (HOST by :func:`host_name`, USER never starting with '-') or a context name."""
    fix = "write unix:///path/docker.sock, tcp://HOST:2376, ssh://USER@HOST or a 'docker context ls' name"
    given, value = value, re.sub(r"(://[^/@\s:]*:)[^/@\s]*@", r"\1***@", value)  # messages never show a password
    if "://" not in given:
        if not _CONTEXT_RE.fullmatch(given):
            raise RuleError(f"Docker host {value!r} is neither a URL nor a context name", fix)
        return given
    scheme, _, rest = given.partition("://")
    if scheme not in DOCKER_HOST_SCHEMES:
        raise RuleError(f"Docker host {value!r} has scheme {scheme!r}, not one of {', '.join(DOCKER_HOST_SCHEMES)}",
                        fix)
    if scheme == "unix":
        if not rest.startswith("/"):
            raise RuleError(f"Docker host {value!r} is not an absolute socket path",
                            "write unix:///var/run/docker.sock (three slashes)")
        return given
    try:
        parts = urlsplit(given)
        host, _port = parts.hostname, parts.port  # .port raises on a bad port
    except ValueError:
        raise RuleError(f"Docker host {value!r} is not a valid URL", f"write {scheme}://HOST[:PORT]") from None
    if not host or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise RuleError(f"Docker host {value!r} names no host (or has a path)", f"write {scheme}://HOST[:PORT]")
    netloc_host = parts.netloc.rsplit("@", 1)[-1]
    bare = netloc_host[1:netloc_host.index("]")] if netloc_host.startswith("[") else netloc_host.split(":")[0]
    try:
        host_name(bare)
    except RuleError:
        raise RuleError(f"Docker host {value!r} names host {bare!r}, which is not a host name or IP address",
                        "use letters, digits, '.' and '-' (never first), or an IP address") from None
    no_credentials(given, parts, "Docker host", f"{scheme}://HOST[:PORT]",
                   "ssh keys and TLS files (DOCKER_CERT_PATH) authenticate", user=scheme == "ssh")
    if parts.username is not None and not _SSH_USER_RE.fullmatch(parts.username):
        raise RuleError(f"Docker host {value!r} has user {parts.username!r}, which is not a user name",
                        "use letters, digits, '_', '.' and '-' (never first)")
    return given


def no_credentials(url: str, parts: SplitResult, what: str, form: str, how: str, *, user: bool = False) -> None:
    """The one refusal of a URL that carries credentials (``user:password@``, or a user name, often a token,
    unless ``user`` allows one): they would land in a file or a process list. The URL is shown masked;
    ``how`` says what authenticates instead."""
    if parts.password is not None or (not user and parts.username is not None):
        raise RuleError(f"{what} {mask_url_passwords(url)!r} carries credentials", f"write {form}; {how}")
