"""Every connection ddpctl makes to a Docker Engine, and the Engine adapters over it.

One entry: :func:`connect` (``DOCKER_HOST``'s engine, a URL or a docker context) -> a docker-py client that has
answered, or one EngineError naming the engine and the fix. No other module makes a Docker client.

- :mod:`.host_address`: Docker hosts as the user names them (``unix://``, ``tcp://``, ``ssh://``, a context name):
  resolve, client settings (a context's TLS files), the address the other nodes reach a host at.
- :mod:`.client`: the docker-py client (TLS over REQUESTS_CA_BUNDLE, ``ssh://`` through :mod:`.ssh_transport`),
  settings from DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, one-line reasons for a failed connection.
- :mod:`.ssh`: the ``ssh`` command of an ``ssh://`` host, the check that says why it fails, its HostName;
  :mod:`.ssh_transport`: each HTTP connection is ``ssh HOST docker system dial-stdio`` (no paramiko).
- :mod:`.tools`: image lookup, the nvidia-runtime test, a run-once container (the image commands share them).
- :mod:`.docker_engine`: ``DockerEngine``, the adapter of :class:`ddpctl.local.engine_interface.Engine` the executor
  runs on; :mod:`.hosts_engine`: several Docker hosts as one Engine (``up --docker-hosts``); :mod:`.job_engine`:
  which of the two a job runs on (the CLI's one way into this package).

``docker`` is imported only inside functions, so importing this package costs nothing at ``ddpctl --help``.
"""

from __future__ import annotations

import os

from ddpctl.dockerengine.host_address import DEFAULT_HOST, DockerHost, resolve, resolve_all, split_hosts
from ddpctl.errors import EngineError

__all__ = ["DEFAULT_HOST", "DockerHost", "connect", "resolve", "resolve_all", "split_hosts"]

HOST_FIXES = {"ssh": "check that 'ssh HOST docker version' works without a password prompt",
              "tcp": "check that dockerd listens there; for TLS set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH",
              "unix": "check that dockerd runs there and the socket path is right"}


def connect(target: str | DockerHost | None = None, *, timeout: int = 600, raw: bool = False):
    """A docker-py client that has answered a ping, or an EngineError naming the engine and the fix.

    ``target``: None for DOCKER_HOST's engine (TLS from DOCKER_TLS_VERIFY / DOCKER_CERT_PATH; errors name
    DOCKER_HOST); a URL or docker context name (a usage error when it is neither) or a resolved
    :class:`DockerHost` (errors name the host as the user gave it). ``raw``: no ping, and docker-py's own
    error when the client cannot be made (``ddpctl doctor``'s probe reports it as it is)."""
    try:
        import docker  # noqa: F401
    except ImportError:  # pragma: no cover - a declared dependency
        raise EngineError("the Docker SDK for Python is not installed", "pip install docker") from None
    from ddpctl.dockerengine.client import env_client_kwargs, explain, new_client
    from ddpctl.dockerengine.host_address import client_kwargs
    from ddpctl.dockerengine.ssh import ssh_check

    host = resolve(target) if isinstance(target, str) else target
    if host is None:
        where = os.environ.get("DOCKER_HOST", DEFAULT_HOST)
        kw = env_client_kwargs()  # EngineError naming missing TLS files
    else:
        where = host.url
        try:
            kw = client_kwargs(host)
        except EngineError as exc:  # missing TLS files
            raise EngineError(f"cannot reach Docker host {host.given}: {exc.problem}", exc.fix) from None
    if raw:
        return new_client(timeout=timeout, **kw)
    try:
        client = new_client(timeout=timeout, **kw)
        client.ping()
    except Exception as exc:  # DockerException, requests ConnectionError, FileNotFoundError, TLS errors ...
        if where.startswith("ssh://"):  # the connection's ssh is quiet: ask ssh once more, for its reason
            ssh_check(where, host.given if host is not None else None)
        reason, fix = explain(exc, kw)
        if host is None:
            raise EngineError(f"cannot reach the Docker Engine at {where} ({reason})",
                              fix or "start dockerd (scripts/ci-setup.sh does) or point DOCKER_HOST at a running one") from None
        raise EngineError(f"cannot reach Docker host {host.given} ({reason})", fix or HOST_FIXES[host.scheme]) from None
    return client
