"""Docker hosts named by the user (``ddpctl up --docker-hosts``, :func:`ddpctl.dockerengine.connect`): parse,
resolve, the client settings of each, and each one's address.

A Docker host is a URL or the name of a docker context (``docker context ls``):

- ``unix:///path/docker.sock``: a daemon on this machine (its address for the other nodes is not known here,
  so the job needs ``hosts``);
- ``tcp://HOST[:PORT]``: TLS as the docker CLI does it, from ``DOCKER_TLS_VERIFY`` / ``DOCKER_CERT_PATH``
  (default port 2376 with TLS, 2375 without);
- ``ssh://[USER@]HOST[:PORT]``: through this machine's ``ssh`` client (``~/.ssh/config``, agent and
  known_hosts apply), which runs ``docker system dial-stdio`` on the host;
- a context name: its docker endpoint and, for tcp, its TLS material (``DOCKER_CONFIG`` locates the store).

For tcp:// and ssh:// the host part is also the node's address (node 0's is the master address) unless the
job lists ``hosts``. Nothing here connects: :func:`ddpctl.dockerengine.connect` does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

from ddpctl import rules
from ddpctl.errors import UsageError

SCHEMES = ("unix", "tcp", "ssh")
DEFAULT_HOST = "unix:///var/run/docker.sock"  # DOCKER_HOST's default, as docker-py and the docker CLI have it
_CONTEXT_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.+-]*$")


@dataclass(frozen=True)
class DockerHost:
    given: str  # as the user wrote it (URL or context name): how messages name the host
    url: str  # the engine endpoint
    context: str | None = None  # the context it came from

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0]

    @property
    def address(self) -> str | None:
        """The machine's address as the URL names it (tcp/ssh), None for a local socket."""
        if self.scheme not in ("tcp", "ssh"):
            return None
        return urlsplit(self.url).hostname

    def node_address(self) -> str | None:
        """The address the other nodes reach this host's node at: the URL's host, for ssh:// the ``HostName``
        ssh resolves it to (an alias in ~/.ssh/config is no name the other hosts know)."""
        if self.scheme == "ssh":
            from ddpctl.dockerengine.ssh import ssh_hostname

            return ssh_hostname(self.url) or self.address
        return self.address

    @property
    def is_local(self) -> bool:
        return self.scheme == "unix"


def split_hosts(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``a,b`` (or a list of such) -> ('a', 'b'), split as every host list is (:func:`ddpctl.rules.split_list`);
    a host given twice is a usage error."""
    if not text:
        return ()
    parts = [text] if isinstance(text, str) else list(text)
    out = tuple(h for part in parts for h in rules.split_list(part))
    seen: set[str] = set()
    for h in out:
        if h in seen:
            raise UsageError(f"--docker-hosts lists {h} twice", "give each Docker host once, one per node")
        seen.add(h)
    return out


def _check_url(given: str) -> str:
    """The Docker host rule (:func:`ddpctl.rules.docker_host`: the host passes the ``--hosts`` rule) as a usage
    error."""
    try:
        rules.docker_host(given)
    except rules.RuleError as exc:
        raise UsageError(exc.problem, exc.fix) from None
    return given.rstrip("/")


def resolve(given: str) -> DockerHost:
    """A URL as it is, or a docker context's endpoint. Usage errors for bad URLs and unknown contexts."""
    if "://" in given or not _CONTEXT_NAME.match(given):
        return DockerHost(given, _check_url(given))
    if given == "default":
        return DockerHost(given, _check_url(os.environ.get("DOCKER_HOST") or DEFAULT_HOST))
    meta = _context_dir(given, "meta") / "meta.json"
    try:
        endpoint = json.loads(meta.read_text())["Endpoints"]["docker"]
        url = str(endpoint["Host"])
    except FileNotFoundError:
        raise UsageError(f"there is no docker context named {given!r}",
                         "list them with 'docker context ls', or give a URL (unix://, tcp://, ssh://)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"docker context {given!r} cannot be read ({meta}: {exc})",
                         "check it with 'docker context inspect'") from None
    return DockerHost(given, _check_url(url), context=given)


def _context_dir(name: str, kind: str) -> Path:
    """Where the docker CLI keeps context ``name``'s metadata (``meta``) or TLS files (``tls``)."""
    config = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    return Path(config) / "contexts" / kind / hashlib.sha256(name.encode()).hexdigest()


def resolve_all(given: Sequence[str]) -> tuple[DockerHost, ...]:
    return tuple(resolve(g) for g in given)


def client_kwargs(host: DockerHost, environ=None) -> dict:
    """docker.DockerClient keyword arguments for ``host`` (TLS from the context or the environment)."""
    environ = os.environ if environ is None else environ
    if host.context and host.scheme == "tcp":
        kw = {"base_url": host.url}
        tls = _context_dir(host.context, "tls") / "docker"
        if tls.is_dir():  # what 'docker context create --docker ca=,cert=,key=' stored
            from docker.tls import TLSConfig

            meta = json.loads((_context_dir(host.context, "meta") / "meta.json").read_text())
            skip = bool(meta["Endpoints"]["docker"].get("SkipTLSVerify"))
            ca, cert, key = (tls / "ca.pem", tls / "cert.pem", tls / "key.pem")
            kw["tls"] = TLSConfig(client_cert=(str(cert), str(key)) if cert.exists() else None,
                                  ca_cert=str(ca) if ca.exists() and not skip else None, verify=not skip)
    elif host.scheme == "tcp":
        from ddpctl.dockerengine.client import env_client_kwargs

        kw = env_client_kwargs({**environ, "DOCKER_HOST": host.url})
    else:
        kw = {"base_url": host.url}
    return kw  # ssh://: ddpctl.dockerengine.client.new_client connects through the system ssh
