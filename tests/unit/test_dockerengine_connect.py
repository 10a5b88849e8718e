"""ddpctl.dockerengine without a daemon: client settings (ddpctl.dockerengine.client), ssh commands and the ssh
transport (.ssh, .ssh_transport), error texts.

The real connections (TLS daemons, sshd, a 2-host job over each) are in tests/integration/test_two_hosts.py."""

from __future__ import annotations

import os
import shutil
import ssl

import pytest

from ddpctl.dockerengine import client as dc
from ddpctl.dockerengine import ssh
from ddpctl.errors import EngineError


def _certs(tmp_path, names=dc.TLS_FILES):
    for name in names:
        (tmp_path / name).write_text("x")
    return tmp_path


def test_the_clients_own_ca_wins_over_the_environments_bundle(tmp_path, monkeypatch):
    """requests would let REQUESTS_CA_BUNDLE replace docker-py's CA (docker/docker-py#2433)."""
    from docker.tls import TLSConfig

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    ca = _certs(tmp_path) / "ca.pem"
    client = dc.new_client(base_url="tcp://10.0.0.5:2376", version="1.41",
                           tls=TLSConfig(ca_cert=str(ca), verify=True))
    settings = client.api.merge_environment_settings("https://10.0.0.5:2376/version", {}, False, None, None)
    assert settings["verify"] == str(ca)
    unverified = dc.new_client(base_url="tcp://10.0.0.5:2376", version="1.41", tls=TLSConfig(verify=False))
    assert unverified.api.merge_environment_settings("https://h/", {}, False, None, None)["verify"] is False
    plain = dc.new_client(base_url="tcp://10.0.0.5:2375", version="1.41")  # nothing set: the bundle applies
    assert plain.api.merge_environment_settings("https://h/", {}, False, None, None)["verify"] == \
        "/etc/ssl/certs/ca-certificates.crt"


def test_missing_tls_files_are_named(tmp_path):
    with pytest.raises(EngineError) as info:
        dc.env_client_kwargs({"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "1",
                              "DOCKER_CERT_PATH": str(_certs(tmp_path, ["ca.pem"]))})
    assert f"DOCKER_CERT_PATH={tmp_path} has no cert.pem, key.pem for TLS" in str(info.value)
    assert "point DOCKER_CERT_PATH at the directory" in str(info.value)


def test_cert_path_alone_verifies_too(tmp_path):
    kw = dc.env_client_kwargs({"DOCKER_HOST": "tcp://h:2376", "DOCKER_CERT_PATH": str(_certs(tmp_path))})
    assert kw["tls"].verify is True and kw["tls"].ca_cert == str(tmp_path / "ca.pem")
    assert "tls" not in dc.env_client_kwargs({"DOCKER_HOST": "tcp://h:2375"})


def test_ssh_urls_use_the_system_ssh_without_paramiko():
    from ddpctl.dockerengine.ssh_transport import SSHAdapter

    client = dc.new_client(base_url="ssh://me@gpu1:2222", version="1.41", timeout=7)
    adapter = client.api.get_adapter("http+docker://localhost/v1.41/_ping")
    assert isinstance(adapter, SSHAdapter)
    assert adapter.argv == ["ssh", "-o", "BatchMode=yes", "-l", "me", "-p", "2222", "--", "gpu1", "docker",
                            "system", "dial-stdio"]
    # one connection pool for the host, whatever the path (docker-py's unix adapter keeps one per URL)
    assert adapter.get_connection("http+docker://localhost/a") is adapter.get_connection("http+docker://localhost/b")
    assert ssh.ssh_argv("ssh://gpu2") == ["ssh", "--", "gpu2"]


def test_the_ssh_transport_speaks_http_through_the_command(tmp_path):
    """SSHConnection runs its command with stdin/stdout on a socket pair: here a tiny HTTP responder stands in
    for ``ssh HOST docker system dial-stdio`` (no sshd in unit tests)."""

    responder = tmp_path / "responder.py"
    started = tmp_path / "started"
    responder.write_text(
        "import sys\n"
        f"open({str(started)!r}, 'a').write('x')\n"
        "r = sys.stdin.buffer\n"
        "while True:\n"
        "    line = r.readline()\n"
        "    if not line: break\n"
        "    if line in (b'\\r\\n', b'\\n'):\n"
        "        sys.stdout.buffer.write(b'HTTP/1.1 200 OK\\r\\nContent-Type: text/plain\\r\\nApi-Version: 1.41\\r\\n'\n"
        "                               b'Content-Length: 2\\r\\n\\r\\nOK'); sys.stdout.buffer.flush()\n")
    client = dc.new_client(base_url="ssh://x", version="1.41")
    adapter = client.api.get_adapter("http+docker://localhost/")
    adapter.argv = [shutil.which("python3") or "python3", str(responder)]
    assert client.ping() is True and client.ping() is True
    assert client.api.get("http+docker://localhost/v1.41/containers/json").text == "OK"  # another path
    client.close()
    assert started.read_text() == "x"  # one command for all three requests: the connection was reused


def test_ssh_hostname_follows_the_ssh_config(tmp_path, monkeypatch):
    """``ssh -G``: the real client, given a config through a wrapper on PATH (ssh reads ~ from passwd)."""
    real = shutil.which("ssh")
    if real is None:  # CI installs openssh (scripts/ci-setup-ssh.sh) and sets DDPCTL_REQUIRE_DOCKER=1: fail there
        (pytest.fail if os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1" else pytest.skip)(
            "no ssh client: run scripts/ci-setup-ssh.sh")
    cfg = tmp_path / "config"
    cfg.write_text("Host gpu1\n  HostName 10.9.8.7\n  Port 2200\n")
    wrapper = tmp_path / "bin" / "ssh"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {real} -F "{cfg}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    assert ssh.ssh_hostname("ssh://me@gpu1") == "10.9.8.7"
    assert ssh.ssh_hostname("ssh://10.1.1.1:22") == "10.1.1.1"

    from ddpctl.dockerengine import host_address as dh

    assert dh.resolve("ssh://me@gpu1").node_address() == "10.9.8.7"
    assert dh.resolve("tcp://gpu1:2376").node_address() == "gpu1"


def test_ssh_check_reports_ssh_in_one_line(tmp_path, monkeypatch):
    fake = tmp_path / "ssh"  # a stand-in for ssh: no sshd here (the integration tests use a real one)
    fake.write_text("#!/bin/sh\necho 'debug junk' >&2\necho 'ssh: connect to host gpu1 port 22: Connection refused' >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(EngineError) as info:
        ssh.ssh_check("ssh://me@gpu1", "gpu1ctx")
    msg = info.value.message
    assert msg.startswith("cannot reach Docker host gpu1ctx (ssh: connect to host gpu1 port 22: Connection refused)")
    assert "make 'ssh me@gpu1 docker version' work from here without a prompt" in msg
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(EngineError, match="there is no 'ssh' client on this machine"):
        ssh.ssh_check("ssh://gpu1")


@pytest.mark.parametrize("error, reason, fix", [
    ('400 Client Error: Bad Request ("Client sent an HTTP request to an HTTPS server.")',
     "it speaks TLS and this client does not", "set DOCKER_TLS_VERIFY=1"),
    (str(ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to "
                                          "get local issuer certificate")),
     "its TLS certificate is not signed by the CA in /c/ca.pem", "point DOCKER_CERT_PATH"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch, certificate is not valid "
     "for '10.0.0.5'", "its TLS certificate does not name 10.0.0.5", "subjectAltName"),
    ("SSLError(1, '[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate')",
     "the daemon refused the client certificate /c/cert.pem", "--tlscacert"),
    ("Max retries exceeded (Caused by NewConnectionError('...: [Errno 111] Connection refused'))",
     "nothing listens on 10.0.0.5:2376: connection refused", None),
])
def test_connection_errors_are_explained(error, reason, fix):
    from docker.tls import TLSConfig

    tls = TLSConfig.__new__(TLSConfig)
    tls.ca_cert, tls.cert, tls.verify = "/c/ca.pem", ("/c/cert.pem", "/c/key.pem"), True
    got_reason, got_fix = dc.explain(Exception(error), {"base_url": "tcp://10.0.0.5:2376", "tls": tls})
    assert got_reason == reason
    assert (got_fix is None) if fix is None else (fix in got_fix)


# ------------------------------------------------------------------------------ the one entry: connect()
# Real failures without a daemon: a socket path with nothing at it, a TCP port nothing listens on.


def test_connect_names_docker_host_when_given_nothing(tmp_path, monkeypatch):
    from ddpctl.dockerengine import connect

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nowhere.sock")
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EngineError) as exc:
        connect(timeout=5)
    assert exc.value.message == (f"cannot reach the Docker Engine at unix://{tmp_path}/nowhere.sock (there is no "
                                 "socket at that path); start dockerd (scripts/ci-setup.sh does) or point "
                                 "DOCKER_HOST at a running one")
    assert exc.value.exit_code == 1
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path))  # missing TLS files: named before anything connects
    with pytest.raises(EngineError, match=f"DOCKER_CERT_PATH={tmp_path} has no ca.pem, cert.pem, key.pem"):
        connect(timeout=5)


def test_connect_names_the_host_as_given(tmp_path, monkeypatch):
    import socket

    from ddpctl.dockerengine import connect, resolve
    from ddpctl.errors import UsageError

    with pytest.raises(EngineError) as exc:
        connect(f"unix://{tmp_path}/nowhere.sock", timeout=5)
    assert exc.value.message == (f"cannot reach Docker host unix://{tmp_path}/nowhere.sock (there is no socket at "
                                 "that path); check that dockerd runs there and the socket path is right")
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    with pytest.raises(EngineError) as exc:
        connect(resolve(f"tcp://127.0.0.1:{port}"), timeout=5)
    assert exc.value.problem == f"cannot reach Docker host tcp://127.0.0.1:{port} (nothing listens on " \
                                f"127.0.0.1:{port}: connection refused)"
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # an empty context store
    with pytest.raises(UsageError, match="no docker context named 'nosuchcontext'"):  # before anything connects
        connect("nosuchcontext")


def test_connect_raw_gives_docker_pys_own_error(tmp_path, monkeypatch):
    import docker

    from ddpctl.dockerengine import connect

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nowhere.sock")
    with pytest.raises(docker.errors.DockerException, match="Error while fetching server API version"):
        connect(timeout=5, raw=True)


def test_the_engines_connect_through_the_one_entry(monkeypatch):
    import ddpctl.dockerengine
    from ddpctl.dockerengine.docker_engine import DockerEngine
    from ddpctl.dockerengine.hosts_engine import connect_hosts

    asked = []
    monkeypatch.setattr(ddpctl.dockerengine, "connect", lambda host=None: asked.append(host) or object())
    monkeypatch.setenv("DOCKER_HOST", "unix:///x.sock")
    assert DockerEngine().name == "unix:///x.sock" and DockerEngine().client is not None
    hosts = connect_hosts(["tcp://10.0.0.5:2376", "unix:///y.sock"])
    assert [h.name for h in hosts.hosts] == ["tcp://10.0.0.5:2376", "unix:///y.sock"] and asked == [None]
    assert [h.address for h in hosts.hosts] == ["10.0.0.5", None]
    hosts.hosts[1].engine.client  # noqa: B018 - connects on first use
    assert [getattr(h, "given", h) for h in asked] == [None, "unix:///y.sock"]
