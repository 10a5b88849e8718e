"""A job across two Docker hosts, on the real engine: the per-host compose files from
``ddpctl render compose --hosts`` run with docker-compose 1.29.2.

Everything here is real: two network namespaces joined by a veth pair (10.216.0.1 and 10.216.0.2), a dockerd
in each (twohost.py), the CPU image loaded into both, containers with host networking, torchrun's static
rendezvous from host b to host a over the veth link and gloo between four processes. Nothing is a stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from itest_helpers import ddpctl
from twohost import TwoHosts

TRAIN = ["ddp-train", "--max-steps", "20"]


def _required() -> bool:
    return os.environ.get("DDPCTL_REQUIRE_DOCKER") == "1"


@pytest.fixture(scope="module")
def two_hosts(engine, cpu_image):
    problem = None
    if os.geteuid() != 0:
        problem = "not root (network namespaces and a dockerd each need root)"
    elif not (shutil.which("dockerd") or os.path.exists("/usr/sbin/dockerd")):
        problem = "no dockerd binary"
    elif not (shutil.which("ip") and shutil.which("nsenter")):
        problem = "no 'ip' (iproute2) or 'nsenter' (util-linux)"
    if problem:
        (pytest.fail if _required() else pytest.skip)(f"no two-host fixture: {problem}")
    had_docker0 = os.path.exists("/sys/class/net/docker0")
    hosts = TwoHosts()
    try:
        t0 = time.monotonic()
        hosts.start()
        hosts.load_image(cpu_image)
        print(f"two dockerd up and {cpu_image} loaded into both in {time.monotonic() - t0:.1f} s")
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "a test dockerd removed docker0"
        yield hosts
    finally:
        t0 = time.monotonic()
        hosts.stop()
        print(f"two dockerd stopped and removed in {time.monotonic() - t0:.1f} s")
        assert os.path.exists("/sys/class/net/docker0") == had_docker0, "a test dockerd removed docker0"


@pytest.fixture
def job(two_hosts):
    """A unique job name; nothing labelled with it may be left on either host afterwards."""
    name = f"mh{uuid.uuid4().hex[:8]}"
    yield name
    left = {h.name: h.labelled(name) for h in two_hosts.hosts}
    for h in two_hosts.hosts:
        if left[h.name]:
            h.docker("rm", "-f", *left[h.name], check=False)
    assert left == {"a": [], "b": []}, f"left behind: {left}"


def _summaries(text: str) -> list[dict]:
    return [json.loads(line[line.index("{"):]) for line in text.splitlines()
            if '"event": "summary"' in line and "{" in line]


def test_fixture_hosts_see_only_their_own_namespace_address(two_hosts, cpu_image):
    """Host networking on host b gives the container host b's address, and host a is reachable from it."""
    a, b = two_hosts.hosts
    probe = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('10.216.0.1', 9)); "
             "print('src', s.getsockname()[0])")
    r = b.docker("run", "--rm", "--network", "host", cpu_image, "python3", "-c", probe, check=False)
    assert r.returncode == 0 and "src 10.216.0.2" in r.stdout, r.stdout + r.stderr
    addrs = a.in_netns("ip", "-4", "-o", "addr").stdout
    assert "inet 10.216.0.1/24" in addrs and "10.216.0.2" not in addrs, addrs


def test_per_host_compose_files_run_with_docker_compose(two_hosts, cpu_image, job, tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed; run scripts/ci-setup.sh")
    out = tmp_path / "compose.yaml"
    r = ddpctl("render", "compose", "--name", job, "--nodes", "2", "--nproc-per-node", "2", "--network", "host",
               "--hosts", ",".join(two_hosts.addresses), "--image", cpu_image, "-o", str(out), "--", *TRAIN)
    assert r.returncode == 0, r.stderr
    files = [tmp_path / f"compose.node-{i}.yaml" for i in range(2)]
    assert all(f.exists() for f in files), sorted(p.name for p in tmp_path.iterdir())
    # each host runs its own file, as a user would on two machines: docker-compose -f <file> up
    runs = []
    for host, f in zip(two_hosts.hosts, files, strict=True):
        base = [compose, "-f", str(f), "-p", job, "--no-ansi"]
        runs.append((host, base, subprocess.Popen([*base, "up", "--no-color"], env=host.env(), text=True,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    try:
        results = [(host, base, *p.communicate(timeout=400), p.returncode) for host, base, p in runs]
        for host, _, stdout, stderr, code in results:
            assert code == 0, f"host {host.name}: {stdout[-2000:]}\n{stderr[-2000:]}"
        for i, host in enumerate(two_hosts.hosts):
            state = json.loads(host.docker("inspect", f"{job}-node-{i}").stdout)[0]["State"]
            log = host.docker("logs", f"{job}-node-{i}").stdout
            assert (state["Status"], state["ExitCode"]) == ("exited", 0), (host.name, state, log[-3000:])
        master_log = two_hosts.hosts[0].docker("logs", f"{job}-node-0").stdout
        summaries = _summaries(master_log)
        assert summaries, master_log[-2000:]
        assert summaries[-1]["sync_check"] == "pass" and summaries[-1]["world_size"] == 4, summaries[-1]
        # the worker lines of node 1 (ranks 2 and 3) ran on host b
        r1 = two_hosts.hosts[1].docker("logs", f"{job}-node-1")
        node1 = r1.stdout + r1.stderr
        assert "rank-2 | " in node1 and "rank-3 | " in node1, node1[-2000:]
    finally:
        for host, base, p in runs:
            if p.poll() is None:
                p.kill()
            subprocess.run([*base, "down", "-v", "--remove-orphans"], env=host.env(), capture_output=True,
                           timeout=120)
