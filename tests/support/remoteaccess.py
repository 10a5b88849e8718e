"""TLS and ssh access to the two test Docker hosts (twohost.py): certificates, sshd, ssh client set-up.

Real: ``openssl`` makes a CA, a server certificate per host (its network-namespace address in subjectAltName)
and a client certificate, in a temporary directory; each test dockerd also listens on ``tcp://ADDR:2376`` with
``--tlsverify`` (it accepts only clients with a certificate of that CA). A second, unrelated CA and a client
certificate of it stand for "the wrong CA". Debian's ``sshd`` runs inside each host's network namespace on its
address (host a on port 22, host b on 2222), with a generated host key, ``AuthorizedKeysFile`` naming a
generated client key and ``SetEnv DOCKER_HOST=unix://<that host's dockerd socket>``, so an ssh session's
``docker system dial-stdio`` reaches that host's daemon, as on a machine of its own.

The client side is the machine's real ``ssh`` (what docker-py's ``use_ssh_client`` runs). It reads
``~/.ssh/config`` from the passwd entry's home directory, not ``$HOME``, and the real one must not be touched:
:func:`ssh_client_dir` writes a directory holding an ``ssh`` that execs ``/usr/bin/ssh -F <test config>``
(known_hosts with both host keys, the client key, ``BatchMode``) and is put first on ``PATH``. Nothing else
about ssh is replaced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TLS_PORT = 2376
SSH_PORTS = {"a": 22, "b": 2222}
# ~/.ssh/config aliases of the test's client config: host a under a name no host resolves (ddpctl must use the
# HostName ssh resolves it to as the node's address), and host b with a known_hosts that lacks its key.
ALIAS_A = "node0.ddmh"
ALIAS_B_UNKNOWN_KEY = "stranger.ddmh"


def _run(*argv: str, cwd: Path | None = None) -> None:
    subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60, cwd=cwd)


def _ca(d: Path, name: str) -> None:
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca.pem"))


def _signed(ca: Path, out: Path, cn: str, ext: str) -> None:
    """``out``-key.pem and ``out``.pem: a key and a certificate for ``cn`` signed by the CA in ``ca``."""
    key, csr, crt, extfile = (out.with_name(out.name + s) for s in ("-key.pem", ".csr", ".pem", ".ext"))
    extfile.write_text(ext + "\n")
    _run("openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", str(key),
         "-out", str(csr))
    _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca / "ca.pem"), "-CAkey", str(ca / "ca-key.pem"),
         "-CAcreateserial", "-days", "2", "-extfile", str(extfile), "-out", str(crt))
    csr.unlink()
    extfile.unlink()


def _cert_dir(dest: Path, ca: Path, client: Path) -> Path:
    """A DOCKER_CERT_PATH: ca.pem, cert.pem, key.pem (the names the docker CLI and docker-py look for)."""
    dest.mkdir()
    shutil.copy(ca / "ca.pem", dest / "ca.pem")
    shutil.copy(client.with_name(client.name + ".pem"), dest / "cert.pem")
    shutil.copy(client.with_name(client.name + "-key.pem"), dest / "key.pem")
    return dest


class PKI:
    """A CA with a server certificate per host and a client certificate; a foreign CA and its client."""

    def __init__(self, root: Path, hosts: dict[str, str]) -> None:  # name -> address
        self.root = root
        ca, other = root / "ca", root / "other-ca"
        for d, name in ((ca, "ddpctl test CA"), (other, "some other CA")):
            d.mkdir(parents=True)
            _ca(d, name)
        self.server: dict[str, tuple[Path, Path]] = {}
        for name, addr in hosts.items():
            _signed(ca, ca / f"server-{name}", f"host {name}",
                    f"subjectAltName=IP:{addr}\nextendedKeyUsage=serverAuth")
            self.server[name] = (ca / f"server-{name}.pem", ca / f"server-{name}-key.pem")
        _signed(ca, ca / "client", "ddpctl client", "extendedKeyUsage=clientAuth")
        _signed(other, other / "client", "stranger", "extendedKeyUsage=clientAuth")
        self.ca = ca / "ca.pem"
        self.certs = _cert_dir(root / "client", ca, ca / "client")  # the good DOCKER_CERT_PATH
        self.wrong_ca = _cert_dir(root / "wrong-ca", other, other / "client")  # another CA, its client cert
        self.empty = root / "no-certs"
        self.empty.mkdir()

    def dockerd_args(self, name: str, addr: str) -> list[str]:
        cert, key = self.server[name]
        return ["-H", f"tcp://{addr}:{TLS_PORT}", "--tlsverify", "--tlscacert", str(self.ca), "--tlscert",
                str(cert), "--tlskey", str(key)]


def _keygen(path: Path, comment: str) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    return path.with_name(path.name + ".pub").read_text().strip()


def sshd_binary() -> str | None:
    found = shutil.which("sshd") or "/usr/sbin/sshd"
    return found if os.access(found, os.X_OK) else None


class SSH:
    """Keys, one sshd config per host, and the client's config and ``ssh`` wrapper, under ``root``."""

    def __init__(self, root: Path, hosts: dict[str, tuple[str, str]]) -> None:  # name -> (address, DOCKER_HOST)
        self.root = root
        root.mkdir()
        client_pub = _keygen(root / "client_ed25519", "ddpctl-test-client")
        (root / "authorized_keys").write_text(client_pub + "\n")
        known = []
        self.configs: dict[str, Path] = {}
        for name, (addr, docker_host) in hosts.items():
            port = SSH_PORTS[name]
            hostkey = root / f"host_{name}_ed25519"
            kind, blob = _keygen(hostkey, f"host-{name}").split()[:2]
            known.append(f"{addr if port == 22 else f'[{addr}]:{port}'} {kind} {blob}")
            cfg = root / f"sshd_{name}.conf"
            cfg.write_text("\n".join([
                f"Port {port}", f"ListenAddress {addr}", f"HostKey {hostkey}", f"PidFile {root}/sshd_{name}.pid",
                f"AuthorizedKeysFile {root}/authorized_keys", "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "PrintMotd no", "LogLevel VERBOSE",
                # docker over ssh opens a connection per request, several at once; under load their logins are
                # slow and sshd's default (10:30:100) drops new ones at random: kex_exchange_identification resets
                "MaxStartups 200",
                # the session's docker CLI (docker system dial-stdio) talks to this host's daemon
                f"SetEnv DOCKER_HOST={docker_host}",
            ]) + "\n")
            self.configs[name] = cfg
        (root / "known_hosts").write_text("\n".join(known) + "\n")
        self.client_config = root / "ssh_config"
        addr_a, addr_b = hosts["a"][0], hosts["b"][0]
        self.client_config.write_text("\n".join([  # ssh takes the first value it finds: the aliases first
            f"Host {ALIAS_A}", f"  HostName {addr_a}",
            f"Host {ALIAS_B_UNKNOWN_KEY}", f"  HostName {addr_b}", f"  Port {SSH_PORTS['b']}",
            "  UserKnownHostsFile /dev/null",
            "Host *", f"  IdentityFile {root}/client_ed25519", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {root}/known_hosts", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  BatchMode yes", "  ConnectTimeout 5", "  LogLevel ERROR",
        ]) + "\n")
        self.bin = root / "bin"
        self.bin.mkdir()
        real = shutil.which("ssh") or "/usr/bin/ssh"
        wrapper = self.bin / "ssh"
        wrapper.write_text(f'#!/bin/sh\n# the real ssh, with the test\'s config instead of ~/.ssh/config\nexec {real} -F "{self.client_config}" "$@"\n')
        wrapper.chmod(0o755)

    def env(self) -> dict[str, str]:
        """PATH with the ``ssh`` of the test's config first (for ddpctl's docker-py and the docker CLI)."""
        return {"PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
