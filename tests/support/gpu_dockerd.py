"""A second, private Docker daemon whose GPU path is real up to the driver: Docker's own ``nvidia`` device driver.

dockerd registers its ``nvidia`` device driver when ``nvidia-container-runtime-hook`` is on its PATH at start.
It then accepts device requests (``--gpus``, compose ``deploy.resources.reservations.devices``, the SDK's
``DeviceRequest``), sets ``NVIDIA_VISIBLE_DEVICES`` in the container to the ids it was given (or ``all``)
and adds the hook as an OCI prestart hook. Here the hook is a stand-in script that records each call and
exits 0 (there is no GPU and no libnvidia-container on this machine); everything else is the real daemon.

The daemon gets its own --data-root, --exec-root, unix socket and pidfile, a default bridge of its own
(``--bridge=ddgpu0``, created and deleted here: ``--bridge=none`` would make it delete the host's ``docker0``,
which the shared engine needs), ``--iptables=false`` (the host's iptables belong to the shared engine; one marked
FORWARD rule for its own pool is added and removed) and its own address pool (user networks never overlap
the shared engine's). It is a child of the test process and is
stopped (SIGTERM, then its containers are gone with its data root) by :meth:`GpuDockerd.stop`.

With ``cache=NAME`` its data root is kept between test runs under ``testcache.root()`` (``dockerd-NAME``),
so the image a test loads into it is loaded once per machine and image id, not once per run (the CUDA image's
``docker save | docker load`` is ~70-160 s of untar on 2 cores): :meth:`GpuDockerd.load_image` loads only
when the daemon lacks that very image id (the layers it shares with the image there before are not unpacked
again), then removes every other image of the daemon (one image per cache, so it does not grow). Containers left by a killed run are removed at start. A second test session
that wants the same cache while one holds it gets a fresh data root of its own (the slow path), never a shared
one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import testcache

HOOK = "nvidia-container-runtime-hook"
POOL = "10.213.0.0/16"
BRIDGE = "ddgpu0"  # its default bridge (never docker0, the shared engine's)
BRIDGE_ADDR = "10.214.0.1/24"
ADDRESS_POOL = f"base={POOL},size=24"
# The shared engine sets the FORWARD policy to DROP and bridged traffic goes through iptables
# (br_netfilter); this daemon runs with --iptables=false, so one rule lets its own pool talk to itself.
FORWARD_RULE = ["FORWARD", "-s", POOL, "-d", POOL, "-j", "ACCEPT", "-m", "comment", "--comment", "ddpctl-test-gpu-dockerd"]

HOOK_SCRIPT = """#!/bin/sh
# Stand-in for NVIDIA's OCI hook: record the call (args and the OCI state on stdin), change nothing.
{{ echo "ARGS $*"; cat; echo; }} >> {record}
exit 0
"""

NVIDIA_SMI = """#!/bin/sh
# Stand-in nvidia-smi for ddpctl's host preflight: a host with {n} GPUs, driver 580.65.06.
case "$1" in
  -L) i=0; while [ $i -lt {n} ]; do echo "GPU $i: Stand-in GPU (UUID: GPU-0000000$i)"; i=$((i+1)); done ;;
  --query-gpu=driver_version) i=0; while [ $i -lt {n} ]; do echo 580.65.06; i=$((i+1)); done ;;
  *) echo "stand-in nvidia-smi: unsupported $*" >&2; exit 9 ;;
esac
"""


def write_stub(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


class GpuDockerd:
    def __init__(self, tmpfs: bool = True, cache: str | None = None) -> None:
        # tmpfs=False: the data root on disk, for images larger than the 6 GB tmpfs (the CUDA image)
        self.tmpfs = tmpfs
        self.cache = testcache.Entry(f"dockerd-{cache}") if cache else None
        # Short path: the daemon's and containerd's unix sockets live below it (108-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="ddgpu", dir="/tmp"))
        self.bin = self.root / "bin"
        self.bin.mkdir()
        self.record = self.root / "hook-calls.log"
        self.record.touch()
        write_stub(self.bin / HOOK, HOOK_SCRIPT.format(record=self.record))
        self.socket = self.root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.proc: subprocess.Popen | None = None
        self.rule_added = False
        self.mounted = False
        self.bridge_added = False

    def start(self, timeout: float = 60) -> None:
        # The data root on its own tmpfs: unmounting it is instant, deleting ~1 GB of overlay2 layers from
        # disk took 70 s here. With a cache this session holds: the cache's data root, kept after stop().
        self.data = testcache.kept_data_root(self.cache)
        if self.data is None:
            self.cache = None
            self.data = self.root / "data"
            self.data.mkdir()
        if self.tmpfs and self.cache is None:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6g,mode=0711", "ddpctl-test-gpu",
                            str(self.data)], check=True, capture_output=True)
            self.mounted = True
        if shutil.which("iptables") and subprocess.run(["iptables", "-C", *FORWARD_RULE],
                                                       capture_output=True).returncode != 0:
            subprocess.run(["iptables", "-I", *FORWARD_RULE], check=True, capture_output=True)
            self.rule_added = True
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
            for cmd in (["ip", "link", "add", BRIDGE, "type", "bridge"], ["ip", "addr", "add", BRIDGE_ADDR, "dev", BRIDGE],
                        ["ip", "link", "set", BRIDGE, "up"]):
                subprocess.run(cmd, check=True, capture_output=True)
            self.bridge_added = True
        dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
        argv = [dockerd, "--data-root", str(self.data), "--exec-root", str(self.root / "exec"),
                "-H", self.host, "--pidfile", str(self.root / "docker.pid"), f"--bridge={BRIDGE}",
                "--iptables=false", "--ip-masq=false", "--default-address-pool", ADDRESS_POOL]
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"}
        env.pop("DOCKER_HOST", None)
        self.log = (self.root / "dockerd.log").open("w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.docker("version", check=False, timeout=10).returncode == 0:
                if self.cache is not None:
                    testcache.remove_leftovers(self.docker)  # a killed run's, in the kept data root
                return
            time.sleep(0.5)
        raise RuntimeError(f"dockerd did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host, **extra}

    def docker(self, *args: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, check=check,
                              timeout=timeout, **kw)

    def load_image(self, ref: str, source_host: str | None = None) -> str:
        """``docker save REF | docker -H <this daemon> load`` from the shared engine; with a cache, only if this
        daemon lacks that image id. Returns "loaded" or "kept"."""
        if self.cache is not None:
            src_id = subprocess.run(["docker"] + (["-H", source_host] if source_host else []) +
                                    ["image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True,
                                    check=True, timeout=60).stdout.strip()
            if testcache.image_id(self.docker, ref) == src_id:
                return "kept"
        src = ["docker"] + (["-H", source_host] if source_host else []) + ["save", ref]
        save = subprocess.Popen(src, stdout=subprocess.PIPE)
        try:
            load = subprocess.run(["docker", "-H", self.host, "load", "-q"], stdin=save.stdout,
                                  capture_output=True, text=True, timeout=600)
        finally:
            save.stdout.close()
            save.wait(timeout=600)
        if save.returncode != 0 or load.returncode != 0:
            raise RuntimeError(f"loading {ref} failed: {load.stderr}")
        if self.cache is not None:
            testcache.keep_only(self.docker, testcache.image_id(self.docker, ref))
        return "loaded"

    def hook_calls(self) -> list[str]:
        return [line for line in self.record.read_text().splitlines() if line.startswith("ARGS ")]

    def log_tail(self, n: int = 20) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def stop(self, timeout: float = 60) -> None:
        if self.proc and self.proc.poll() is None:
            ids = self.docker("ps", "-aq", check=False, timeout=30).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=120)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()
        if self.rule_added:
            subprocess.run(["iptables", "-D", *FORWARD_RULE], capture_output=True)
        if self.bridge_added:
            subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
        if self.mounted:
            subprocess.run(["umount", "-R", str(self.data)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.cache is not None:
            self.cache.release()
