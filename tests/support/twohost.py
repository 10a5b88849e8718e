"""Two Docker hosts on one machine: two network namespaces joined by a veth pair, a dockerd in each.

Real: two network namespaces (``ip netns``), a veth pair between them with 10.216.0.1/24 in the first and
10.216.0.2/24 in the second, and one real dockerd started inside each (``nsenter --net``), so a container
with host networking on "host a" sees only 10.216.0.1 (and its loopback) and reaches host b at 10.216.0.2
over the veth link, as two machines on one LAN would. Each daemon also gets a host name of its own (a UTS
namespace) that its /etc/hosts maps to its LAN address, and an empty resolv.conf (no DNS on this LAN): gloo
and torchrun bind to the address of gethostname(), which on this machine would be an address the
namespaces do not have. No address outside those namespaces is used: the
namespaces have no route to this machine's network, so a job that works here cannot be leaning on the
shared engine's networks.

Each daemon has its own --data-root (a tmpfs: unmounting it is instant; or, when this session holds them, two
data roots kept between runs with the image loaded into them: testcache.py), --exec-root, unix socket and
pidfile, ``--bridge=none`` and ``--iptables=false``: the jobs use host networking only, and a daemon in its
own network namespace cannot see (let alone delete) the shared engine's ``docker0`` or its iptables rules;
the fixture checks that docker0 survives anyway (see gpu_dockerd.py for what --bridge=none did in the
host's namespace). The sockets are files under one temporary directory, so this process (in the machine's
own namespace) drives both daemons, as ``ddpctl up --docker-hosts`` would drive two remote ones.

:meth:`TwoHosts.load_image` streams one ``docker save`` from the shared engine into both daemons at once.
:meth:`TwoHosts.stop` removes every container, stops both daemons, unmounts their data roots and deletes
the namespaces (the veth pair goes with them) and the directory.

Remote access (remoteaccess.py): each daemon also listens on ``tcp://ADDR:2376`` with ``--tlsverify``
(certificates made by ``openssl`` under the directory), and an ``sshd`` runs in each namespace (host a on port
22, host b on 2222) whose sessions reach that host's daemon. Those addresses exist only inside the
namespaces, so a client that uses them runs in host a's network namespace (:meth:`TwoHosts.client`): "this
machine" is then host a, a machine of the LAN, as a user's would be; host b is across the veth link.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import testcache
from remoteaccess import PKI, SSH, SSH_PORTS, TLS_PORT, sshd_binary

ADDRESSES = ("10.216.0.1", "10.216.0.2")
PREFIX = 24


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=60)


@dataclass
class Host:
    """One Docker host: a network namespace, its address there, and the dockerd inside it."""

    name: str  # "a" / "b"
    netns: str  # also its host name
    addr: str
    root: Path
    proc: subprocess.Popen | None = None
    mounted: bool = False
    log: object = field(default=None, repr=False)
    sshd: subprocess.Popen | None = None
    data: Path | None = None  # its data root: a tmpfs below root, or a cache entry's (testcache.py)

    @property
    def hostname(self) -> str:
        return self.netns

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def tcp_url(self) -> str:
        """The daemon over TCP with TLS (reachable from the namespaces only)."""
        return f"tcp://{self.addr}:{TLS_PORT}"

    @property
    def ssh_url(self) -> str:
        port = SSH_PORTS[self.name]
        return f"ssh://root@{self.addr}" + ("" if port == 22 else f":{port}")

    def docker(self, *args: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
        return subprocess.run(["docker", "-H", self.url, *args], capture_output=True, text=True, check=check,
                              timeout=timeout, env=env, **kw)

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.url, **extra}

    def in_netns(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        """Run a command in this host's network namespace (e.g. to reach the other host's address)."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], capture_output=True, text=True, **kw)

    def log_tail(self, n: int = 20) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def labelled(self, job: str) -> list[str]:
        """Names of the containers on this host labelled with ``job``."""
        out = self.docker("ps", "-a", "--filter", f"label=ddpctl.job={job}", "--format", "{{.Names}}",
                          check=False, timeout=30).stdout
        return sorted(out.split())


class TwoHosts:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        # Short path: the daemons' and containerd's unix sockets live below it (108-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="ddmh", dir="/tmp"))
        self.hosts = [Host(n, f"ddmh-{tag}-{n}", addr, self.root / n) for n, addr in zip("ab", ADDRESSES, strict=True)]
        self.veth = (f"dm{tag}a", f"dm{tag}b")  # <= 15 characters
        self.namespaces: list[str] = []
        self.pki: PKI | None = None
        self.ssh: SSH | None = None
        self._made_privsep = False
        # the two data roots with the image loaded into them, kept between runs when this session holds both
        self.caches = [testcache.Entry(f"dockerd-twohost-{h.name}") for h in self.hosts]
        self.cached = False

    @property
    def urls(self) -> list[str]:
        return [h.url for h in self.hosts]

    @property
    def addresses(self) -> list[str]:
        return [h.addr for h in self.hosts]

    # ------------------------------------------------------------------------------------------ start

    def start(self, timeout: float = 90) -> None:
        self.pki = PKI(self.root / "pki", {h.name: h.addr for h in self.hosts})
        self.ssh = SSH(self.root / "ssh", {h.name: (h.addr, h.url) for h in self.hosts}) if sshd_binary() else None
        for h in self.hosts:
            _run("ip", "netns", "add", h.netns)
            self.namespaces.append(h.netns)
            _run("ip", "-n", h.netns, "link", "set", "lo", "up")
        a, b = self.hosts
        _run("ip", "link", "add", self.veth[0], "netns", a.netns, "type", "veth", "peer", "name", self.veth[1],
             "netns", b.netns)
        for h, dev in zip(self.hosts, self.veth, strict=True):
            _run("ip", "-n", h.netns, "addr", "add", f"{h.addr}/{PREFIX}", "dev", dev)
            _run("ip", "-n", h.netns, "link", "set", dev, "up")
        kept = [testcache.kept_data_root(c) for c in self.caches]
        self.cached = all(d is not None for d in kept)
        if not self.cached:
            for c in self.caches:
                c.release()
        for h, data in zip(self.hosts, kept, strict=True):
            self._start_daemon(h, data if self.cached else None)
        end = time.monotonic() + timeout
        for h in self.hosts:
            while True:
                if h.proc.poll() is not None:
                    raise RuntimeError(f"dockerd {h.name} exited with {h.proc.returncode}:\n{h.log_tail()}")
                if h.docker("version", check=False, timeout=10).returncode == 0:
                    if self.cached:
                        testcache.remove_leftovers(h.docker)  # what a killed run left in the kept data root
                    break
                if time.monotonic() > end:
                    raise RuntimeError(f"dockerd {h.name} did not answer within {timeout:.0f} s:\n{h.log_tail()}")
                time.sleep(0.5)
        if self.ssh:
            self._start_sshds(end)

    def _start_sshds(self, end: float) -> None:
        # sshd insists on its privilege-separation directory (the package's service makes it when it starts)
        if not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", mode=0o755)
            self._made_privsep = True
        for h in self.hosts:
            log = (h.root / "sshd.log").open("w")
            h.sshd = subprocess.Popen(["nsenter", f"--net=/run/netns/{h.netns}", sshd_binary(), "-D", "-e", "-f",
                                       str(self.ssh.configs[h.name])], stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
        for h in self.hosts:
            while True:
                probe = f"import socket; socket.create_connection(('{h.addr}', {SSH_PORTS[h.name]}), 1).close()"
                if self.client("python3", "-c", probe).returncode == 0:
                    break
                if h.sshd.poll() is not None or time.monotonic() > end:
                    log = (h.root / "sshd.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"sshd {h.name} did not listen on {h.addr}:{SSH_PORTS[h.name]}:\n{log}")
                time.sleep(0.2)

    def client(self, *argv: str, env: dict[str, str] | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
        """Run ``argv`` as a client on host a's network (the only place the tcp:// and ssh:// addresses exist)."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.hosts[0].netns}", *argv], capture_output=True,
                              text=True, env=env, timeout=timeout)

    def _start_daemon(self, h: Host, kept: Path | None) -> None:
        h.root.mkdir()
        if kept is not None:
            h.data = kept
        else:
            h.data = h.root / "data"
            h.data.mkdir()
            _run("mount", "-t", "tmpfs", "-o", "size=6g,mode=0711", f"ddpctl-test-{h.netns}", str(h.data))
            h.mounted = True
        # Like a machine of its own: its own host name, resolving (in its /etc/hosts) to its LAN address, as
        # gloo and torchrun expect (they bind to the address of gethostname()); no DNS server on this LAN.
        hosts = h.root / "hosts"
        hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                         + "".join(f"{o.addr}\t{o.hostname}\n" for o in self.hosts))
        resolv = h.root / "resolv.conf"
        resolv.write_text("# no DNS server on the test LAN\noptions timeout:1 attempts:1\n")
        self._spawn_daemon(h)

    def _spawn_daemon(self, h: Host) -> None:
        data, hosts, resolv = h.data, h.root / "hosts", h.root / "resolv.conf"
        dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
        # nsenter --net: into the host's network namespace (not `ip netns exec`: it remounts /sys, hiding
        # /sys/fs/cgroup from the daemon); unshare: a UTS namespace for the host name and a mount namespace
        # (the data root mounted above still shows) for the two files. Each execs the next: h.proc is dockerd.
        setup = 'hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" /etc/resolv.conf && shift 3 && exec "$@"'
        argv = ["nsenter", f"--net=/run/netns/{h.netns}", "unshare", "--uts", "--mount", "--propagation", "slave",
                "sh", "-c", setup, "sh", h.hostname, str(hosts), str(resolv),
                dockerd, "--data-root", str(data), "--exec-root", str(h.root / "exec"),
                "-H", h.url, "--pidfile", str(h.root / "docker.pid"), "--bridge=none", "--iptables=false",
                "--ip-masq=false", "--ip6tables=false", *self.pki.dockerd_args(h.name, h.addr)]
        env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
        env["PATH"] = f"{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"
        h.log = (h.root / "dockerd.log").open("a")
        h.proc = subprocess.Popen(argv, stdout=h.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=env, start_new_session=True)

    def stop_daemon(self, h: Host, timeout: float = 60) -> None:
        """Stop host ``h``'s dockerd as 'systemctl stop docker' does (SIGTERM: it stops its containers first)."""
        if h.proc and h.proc.poll() is None:
            h.proc.send_signal(signal.SIGTERM)
            try:
                h.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                h.proc.kill()
                h.proc.wait(timeout=10)
        if h.log:
            h.log.close()
            h.log = None

    def start_daemon(self, h: Host, timeout: float = 90) -> None:
        """Start host ``h``'s dockerd again (after :meth:`stop_daemon`) on the same data root."""
        self._spawn_daemon(h)
        end = time.monotonic() + timeout
        while h.docker("version", check=False, timeout=10).returncode != 0:
            if h.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"dockerd {h.name} did not come back:\n{h.log_tail()}")
            time.sleep(0.3)

    def load_image(self, ref: str) -> str:
        """One ``docker save REF`` from the shared engine, streamed into ``docker load`` on both hosts; with the
        data roots kept (testcache.py), only when a host lacks that image id, and then every other image is
        removed (one image per cache). Returns "loaded" or "kept"."""
        env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
        want = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True,
                              env=env, check=True, timeout=60).stdout.strip()
        if self.cached and all(testcache.image_id(h.docker, ref) == want for h in self.hosts):
            return "kept"
        self._load(ref, env)
        if self.cached:
            for h in self.hosts:
                testcache.keep_only(h.docker, want)
        return "loaded"

    def _load(self, ref: str, env: dict[str, str]) -> None:
        save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE, env=env)
        logs = [(h.root / "load.log").open("w+") for h in self.hosts]
        loads = [subprocess.Popen(["docker", "-H", h.url, "load", "-q"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=log, env=env) for h, log in zip(self.hosts, logs, strict=True)]
        try:
            while chunk := save.stdout.read(1 << 20):
                for p in loads:
                    p.stdin.write(chunk)
        finally:
            save.stdout.close()
            for p in loads:
                p.stdin.close()
            codes = [p.wait(timeout=900) for p in loads]
            save.wait(timeout=600)
            errors = []
            for h, log, code in zip(self.hosts, logs, codes, strict=True):
                log.seek(0)
                if code:
                    errors.append(f"host {h.name}: {log.read()[-500:]}")
                log.close()
        if save.returncode != 0 or errors:
            raise RuntimeError(f"loading {ref} into the two hosts failed: save exit {save.returncode} {errors}")

    # ------------------------------------------------------------------------------------------- stop

    def stop(self, timeout: float = 60) -> None:
        for h in self.hosts:
            if h.sshd and h.sshd.poll() is None:  # the listener and its sessions (its process group)
                try:
                    os.killpg(h.sshd.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for h in self.hosts:
            if h.sshd:
                try:
                    h.sshd.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    h.sshd.kill()
                    h.sshd.wait(timeout=10)
        if self._made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)
        for h in self.hosts:
            if h.proc and h.proc.poll() is None:
                ids = h.docker("ps", "-aq", check=False, timeout=30).stdout.split()
                if ids:
                    h.docker("rm", "-f", *ids, check=False, timeout=120)
                h.proc.send_signal(signal.SIGTERM)
        for h in self.hosts:
            if h.proc:
                try:
                    h.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
                    h.proc.wait(timeout=10)
            if h.log:
                h.log.close()
            if h.mounted:
                _run("umount", "-R", str(h.data), check=False)
        # Whatever a daemon left mounted below the directory (its netns bind mount in the exec root), deepest first.
        with open("/proc/self/mounts") as f:
            left = [line.split()[1] for line in f if line.split()[1].startswith(f"{self.root}/")]
        for path in sorted(left, key=len, reverse=True):
            _run("umount", "-l", path, check=False)
        for ns in self.namespaces:  # the veth pair is deleted with its namespaces
            _run("ip", "netns", "delete", ns, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        for c in self.caches:
            c.release()
