"""A Docker Engine of the test's own, to stop and restart at will without touching the shared one.

A real dockerd in a network namespace of its own (``ip netns``; so its bridge networks and their traffic never
meet the shared engine's docker0 or iptables rules: ``--iptables=false`` and a fresh namespace's ACCEPT policy),
with its own --data-root (a tmpfs: unmounting it is instant), --exec-root, unix socket and pidfile, all under one
temporary directory (unique per instance, so test workers in parallel each have their own). The image is
streamed in from the shared engine with ``docker save | docker load``. The first instance of a session that
can hold it uses a data root kept between runs instead (testcache.py, ``dockerd-own``): the image is loaded only
when that data root lacks its id, and what a killed run left there (containers, networks, volumes) is removed
at start.

:meth:`OwnEngine.restart` stops the daemon as a package upgrade or ``systemctl restart docker`` does (SIGTERM:
it stops every container, SIGTERM then SIGKILL) and starts it again on the same data root; :meth:`stop_daemon`
and :meth:`start_daemon` do the two halves. :meth:`close` removes everything.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import testcache


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=60)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
    env["PATH"] = f"{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"
    return env


class OwnEngine:
    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        # Short path: the daemon's and containerd's unix sockets live below it (108-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="ddown", dir="/tmp"))
        self.netns = f"ddown-{self.tag}"
        self.socket = self.root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen | None = None
        self.mounted = self.made_netns = False
        self.log = None
        self.cache = testcache.Entry("dockerd-own")
        self.data = self.root / "data"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.url, **extra}

    def docker(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.url, *args], capture_output=True, text=True, check=check,
                              timeout=timeout, env=_clean_env())

    def start(self, timeout: float = 90) -> None:
        _run("ip", "netns", "add", self.netns)
        self.made_netns = True
        _run("ip", "-n", self.netns, "link", "set", "lo", "up")
        kept = testcache.kept_data_root(self.cache)
        if kept is not None:
            self.data = kept
        else:
            self.cache = None
            self.data.mkdir()
            _run("mount", "-t", "tmpfs", "-o", "size=4g,mode=0711", f"ddpctl-test-{self.netns}", str(self.data))
            self.mounted = True
        self.start_daemon(timeout)
        if self.cache is not None:
            testcache.remove_leftovers(self.docker)  # what a killed run left in the kept data root

    def start_daemon(self, timeout: float = 90) -> None:
        dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
        argv = ["nsenter", f"--net=/run/netns/{self.netns}", dockerd, "--data-root", str(self.data),
                "--exec-root", str(self.root / "exec"), "-H", self.url, "--pidfile", str(self.root / "docker.pid"),
                "--bridge=none", "--iptables=false", "--ip-masq=false", "--ip6tables=false"]
        self.log = (self.root / "dockerd.log").open("a")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=_clean_env(), start_new_session=True)
        end = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.docker("version", check=False, timeout=10).returncode == 0:
                return
            if time.monotonic() > end:
                raise RuntimeError(f"dockerd did not answer within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.3)

    def stop_daemon(self, timeout: float = 60) -> None:
        """SIGTERM, as 'systemctl stop docker' sends it: the daemon stops its containers, then exits."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.log:
            self.log.close()
            self.log = None

    def restart(self) -> float:
        """Stop and start the daemon; returns the seconds it was away."""
        t0 = time.monotonic()
        self.stop_daemon()
        self.start_daemon()
        return time.monotonic() - t0

    def load_image(self, ref: str) -> str:
        """``docker save REF`` from the shared engine into this one (with the kept data root: only if it lacks
        that image id; every other image there is removed after). Returns "loaded" or "kept"."""
        want = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True,
                              check=True, timeout=60, env=_clean_env()).stdout.strip()
        if self.cache is not None and testcache.image_id(self.docker, ref) == want:
            return "kept"
        save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE, env=_clean_env())
        try:
            load = subprocess.run(["docker", "-H", self.url, "load", "-q"], stdin=save.stdout, capture_output=True,
                                  text=True, timeout=600, env=_clean_env())
        finally:
            save.stdout.close()
            save.wait(timeout=600)
        if save.returncode != 0 or load.returncode != 0:
            raise RuntimeError(f"loading {ref} failed: {load.stderr}")
        if self.cache is not None:
            testcache.keep_only(self.docker, want)
        return "loaded"

    def labelled(self, job: str) -> dict[str, list[str]]:
        """What carries the job's label here: containers, networks, volumes."""
        f = f"label=ddpctl.job={job}"
        out = {}
        for kind, args, field in (("containers", ["ps", "-a"], "{{.Names}}"), ("networks", ["network", "ls"], "{{.Name}}"),
                                  ("volumes", ["volume", "ls"], "{{.Name}}")):
            res = self.docker(*args, "--filter", f, "--format", field, check=False, timeout=30)
            out[kind] = sorted(res.stdout.split())
        return out

    def log_tail(self, n: int = 20) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            ids = self.docker("ps", "-aq", check=False, timeout=30).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=120)
        self.stop_daemon()
        if self.mounted:
            _run("umount", "-R", str(self.data), check=False)
        with open("/proc/self/mounts") as f:  # whatever the daemon left mounted below the directory
            left = [line.split()[1] for line in f if line.split()[1].startswith(f"{self.root}/")]
        for path in sorted(left, key=len, reverse=True):
            _run("umount", "-l", path, check=False)
        if self.made_netns:
            _run("ip", "netns", "delete", self.netns, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.cache is not None:
            self.cache.release()
