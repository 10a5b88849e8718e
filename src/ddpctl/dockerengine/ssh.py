"""Docker hosts over ssh: the ``ssh`` command line for an ``ssh://`` URL, a check that names why a host cannot be
reached, and the address ssh resolves a host alias to. Only this machine's ``ssh`` client is run (its config,
agent and known_hosts apply); the connection itself is :mod:`ddpctl.dockerengine.ssh_transport`.

- :func:`ssh_check`: ``ssh HOST docker version``, non-interactive, when the client's own ssh connection
  (whose stderr is discarded) failed: a refused connection, a rejected key, an unknown host key or a
  missing docker CLI on the host becomes one line naming the host, with ssh's own reason.
- :func:`ssh_hostname`: ``HostName`` of ~/.ssh/config (``ssh -G``), the address other nodes reach the host at.
"""

from __future__ import annotations

import shlex
import subprocess
from urllib.parse import urlsplit

from ddpctl.errors import EngineError


def ssh_argv(url: str, *command: str, options: tuple[str, ...] = ()) -> list[str]:
    """``ssh [-l USER] [-p PORT] -- HOST COMMAND`` for ``ssh://[USER@]HOST[:PORT]`` (what docker-py runs)."""
    parts = urlsplit(url)
    argv = ["ssh", *options]
    if parts.username:
        argv += ["-l", parts.username]
    if parts.port:
        argv += ["-p", str(parts.port)]
    return [*argv, "--", parts.hostname or "", *command]


def ssh_check(url: str, name: str | None = None, timeout: float = 30) -> None:
    """``ssh HOST docker version`` without a prompt, or an EngineError (naming the host as ``name``, default
    the URL) with ssh's (or the remote docker CLI's) last line."""
    name = name or url
    argv = ssh_argv(url, "docker", "version", "--format", "{{.Server.Version}}",
                    options=("-o", "BatchMode=yes", "-o", "ConnectTimeout=10"))
    parts = urlsplit(url)
    shown = shlex.join(["ssh", *(["-p", str(parts.port)] if parts.port else []),
                        f"{parts.username + '@' if parts.username else ''}{parts.hostname}", "docker", "version"])
    fix = (f"make '{shown}' work from here without a prompt "
           "(a key in ~/.ssh/authorized_keys there or an agent, the host key in known_hosts, the docker CLI "
           "on the host's PATH and its user allowed to use dockerd)")
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EngineError(f"cannot reach Docker host {name}: there is no 'ssh' client on this machine",
                          "install OpenSSH's client (apt-get install openssh-client)") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"cannot reach Docker host {name}: ssh did not finish within {timeout:.0f} s", fix) from None
    if out.returncode != 0 or not out.stdout.strip():
        lines = [ln.strip() for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
        reason = lines[-1].removeprefix("ssh: ")[:200] if lines else f"ssh exited with {out.returncode}"
        raise EngineError(f"cannot reach Docker host {name} (ssh: {reason})", fix)


def ssh_hostname(url: str) -> str | None:
    """The address ``ssh`` connects to for ``url`` (``HostName`` of ~/.ssh/config via ``ssh -G``; nothing is
    contacted), or None when ssh cannot say."""
    try:
        out = subprocess.run(ssh_argv(url, options=("-G",)), capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines() if out.returncode == 0 else ():
        key, _, value = line.partition(" ")
        if key == "hostname" and value.strip():
            return value.strip()
    return None
