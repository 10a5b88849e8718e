"""The docker-py client ddpctl makes (only :func:`ddpctl.dockerengine.connect` calls it): TLS as the docker CLI
does it, ``ssh://`` through this machine's ``ssh``, and one-line reasons when a connection fails. ``docker`` is
imported only when used.

- :func:`new_client`: a docker-py client that keeps the daemon's own TLS CA even when ``REQUESTS_CA_BUNDLE`` or
  ``CURL_CA_BUNDLE`` is set (docker-py lets requests replace it: docker/docker-py#2433, #2598).
- :func:`env_client_kwargs`: DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH; missing TLS files are named;
  DOCKER_CERT_PATH alone verifies too (docker-py would connect unverified, warning on every request);
  ``ssh://`` (in :func:`new_client`) uses the system ``ssh`` (its config, agent, known_hosts), as the
  docker CLI does, through :mod:`ddpctl.dockerengine.ssh_transport`.
- :func:`explain`: (reason, fix) for a failed connection (TLS: wrong CA, a refused client certificate, a
  certificate that does not name the host, plain HTTP to a TLS port).
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from ddpctl.errors import EngineError

TLS_FILES = ("ca.pem", "cert.pem", "key.pem")
_API_CLASS = None


def new_client(**kw):
    """``docker.DockerClient(**kw)`` whose TLS settings win over the environment's CA bundle, and whose
    ``ssh://`` connections are this machine's ``ssh`` (:mod:`ddpctl.dockerengine.ssh_transport`; no paramiko
    needed).

    docker-py gives requests its CA file as the session's ``verify``; requests then lets REQUESTS_CA_BUNDLE /
    CURL_CA_BUNDLE replace it on every request, so with either set (pip and company proxies set them) no
    daemon with a CA of its own could be reached. Here the session's setting wins whenever docker-py made one
    (a CA file, or verification off); the environment's bundle still applies where it made none."""
    global _API_CLASS
    import docker

    if _API_CLASS is None:
        from docker.transport import UnixHTTPAdapter

        class _APIClient(docker.APIClient):
            def __init__(self, *args, ssh_argv=None, **kwargs):
                self._ddpctl_ssh_argv = ssh_argv  # before APIClient.__init__, which mounts the adapters
                super().__init__(*args, **kwargs)

            def mount(self, prefix, adapter):
                if getattr(self, "_ddpctl_ssh_argv", None) and isinstance(adapter, UnixHTTPAdapter):
                    from ddpctl.dockerengine.ssh_transport import SSHAdapter

                    adapter = SSHAdapter(self._ddpctl_ssh_argv, adapter.timeout, adapter.max_pool_size)
                    self._custom_adapter = adapter  # what APIClient.get_adapter returns
                super().mount(prefix, adapter)

            def merge_environment_settings(self, url, proxies, stream, verify, cert):
                out = super().merge_environment_settings(url, proxies, stream, verify, cert)
                if verify is None and self.verify is not True:
                    out["verify"] = self.verify
                return out

        _API_CLASS = _APIClient
    kw = dict(kw)
    kw.pop("use_ssh_client", None)
    base = str(kw.get("base_url") or "")
    if base.startswith("ssh://"):
        from ddpctl.dockerengine.ssh import ssh_argv
        from ddpctl.dockerengine.ssh_transport import PLACEHOLDER

        kw["base_url"] = PLACEHOLDER
        kw["ssh_argv"] = ssh_argv(base, "docker", "system", "dial-stdio", options=("-o", "BatchMode=yes"))
    client = docker.DockerClient.__new__(docker.DockerClient)  # DockerClient.__init__ only makes .api
    client.api = _API_CLASS(**kw)
    return client


def check_tls_files(environ) -> None:
    """With DOCKER_TLS_VERIFY or DOCKER_CERT_PATH set, ca.pem, cert.pem and key.pem must be there (docker-py's
    own error names no file)."""
    cert_path = environ.get("DOCKER_CERT_PATH")
    if not cert_path and not environ.get("DOCKER_TLS_VERIFY"):
        return
    where = cert_path or os.path.join(os.path.expanduser("~"), ".docker")
    missing = [f for f in TLS_FILES if not os.path.isfile(os.path.join(where, f))]
    if missing:
        source = f"DOCKER_CERT_PATH={where}" if cert_path else f"{where} (DOCKER_CERT_PATH is not set)"
        raise EngineError(f"{source} has no {', '.join(missing)} for TLS",
                          "put the CA (ca.pem) and the client certificate and key (cert.pem, key.pem) there, or "
                          "point DOCKER_CERT_PATH at the directory that holds them")


def env_client_kwargs(environ=None) -> dict:
    """docker-py's ``kwargs_from_env`` with the rules in the module docstring."""
    from docker.utils import kwargs_from_env

    environ = dict(os.environ if environ is None else environ)
    check_tls_files(environ)
    if environ.get("DOCKER_CERT_PATH") and "DOCKER_TLS_VERIFY" not in environ:
        environ["DOCKER_TLS_VERIFY"] = "1"
    return kwargs_from_env(environment=environ)


# ----------------------------------------------------------------------------------------- why it failed


def explain(exc: BaseException, kw: dict) -> tuple[str, str | None]:
    """(reason, fix or None) for a failed connection made with client arguments ``kw``."""
    text = " ".join(str(exc).split())
    tls = kw.get("tls")
    ca = getattr(tls, "ca_cert", None)
    cert = (getattr(tls, "cert", None) or (None,))[0]
    host = urlsplit(str(kw.get("base_url", "")).replace("tcp://", "https://")).hostname or "the host"
    if "HTTP request to an HTTPS server" in text:
        return ("it speaks TLS and this client does not",
                "set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH to the directory with ca.pem, cert.pem and key.pem "
                "(or use a docker context made with --docker host=tcp://...,ca=,cert=,key=)")
    m = re.search(r"certificate is not valid for '([^']*)'|hostname '([^']*)' doesn't match", text)
    if "mismatch" in text or m:
        return (f"its TLS certificate does not name {host}",
                "connect by a name or address listed in the daemon certificate's subjectAltName, or reissue it")
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (f"its TLS certificate is not signed by the CA in {ca or 'the system store'}",
                "point DOCKER_CERT_PATH (or the context's ca=) at the CA that signed the daemon's certificate")
    if re.search(r"ALERT_(BAD_CERTIFICATE|CERTIFICATE_REQUIRED|UNKNOWN_CA)|alert (bad|unknown) (certificate|ca)",
                 text, re.IGNORECASE):
        return (f"the daemon refused the client certificate {cert or '(none)'}",
                "use a client certificate signed by the CA the daemon trusts (its --tlscacert)")
    where = urlsplit(str(kw.get("base_url", "")).replace("tcp://", "https://"))
    if "Connection refused" in text:
        return (f"nothing listens on {where.netloc or 'that socket'}: connection refused", None)
    if "No such file or directory" in text and str(kw.get("base_url", "")).startswith(("unix:", "http+unix:")):
        return ("there is no socket at that path", None)
    if "No route to host" in text or "Network is unreachable" in text:
        return (f"no route to {host} from this machine", None)
    if "timed out" in text or "Timeout" in text:
        return (f"the connection to {where.netloc or host} timed out", None)
    if "SSLError" in text or "SSL:" in text:
        return ("TLS failed: " + text[-160:], None)
    return (text[:200], None)
