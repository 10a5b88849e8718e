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

TRAIN = ["ddp-train", "--max-steps", "5"]


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


# ------------------------------------------------------------------------------ ddpctl up --docker-hosts


def _hosts_env(two_hosts, **extra: str) -> dict[str, str]:
    """ddpctl's environment: no DOCKER_HOST (the shared engine must not be needed), the hosts in
    DDPCTL_DOCKER_HOSTS only where a test says so."""
    return {"DOCKER_HOST": "unix:///nonexistent/ddpctl-test-no-default-engine.sock", **extra}


def test_up_across_two_hosts_then_ps_logs_down(two_hosts, cpu_image, job, tmp_path):
    a, b = two_hosts.hosts
    urls = ",".join(two_hosts.urls)
    up = ddpctl("up", "--name", job, "--nodes", "2", "--nproc-per-node", "2", "--docker-hosts", urls,
                "--hosts", ",".join(two_hosts.addresses), "--image", cpu_image, "--", *TRAIN,
                env=_hosts_env(two_hosts), timeout=400)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    assert f"job {job}: 2 node(s) on 2 Docker host(s), world size 4" in up.stderr, up.stderr
    summaries = _summaries(up.stdout)
    assert summaries and summaries[-1]["sync_check"] == "pass" and summaries[-1]["world_size"] == 4, up.stdout[-2000:]
    assert "node-1 rank-2 | " in up.stdout and "node-1 rank-3 | " in up.stdout
    # node i ran on host i, with host networking, node 0's address as the master
    assert a.labelled(job) == [f"{job}-node-0"] and b.labelled(job) == [f"{job}-node-1"]
    cfg = json.loads(b.docker("inspect", f"{job}-node-1").stdout)[0]
    assert cfg["HostConfig"]["NetworkMode"] == "host"
    assert "10.216.0.1" in cfg["Args"] and "--master-addr" in cfg["Args"]

    # ps / logs / down find the job on both hosts: the flag, the environment, docker contexts
    env = _hosts_env(two_hosts, DDPCTL_DOCKER_HOSTS=urls)
    ps = ddpctl("ps", job, env=env)
    assert ps.returncode == 0, ps.stderr
    rows = [line.split() for line in ps.stdout.splitlines()[1:]]
    assert [(r[1], r[2], r[3], r[4], r[-1]) for r in rows] == [
        ("0", f"{job}-node-0", "exited", "0", a.url), ("1", f"{job}-node-1", "exited", "0", b.url)], ps.stdout
    config = tmp_path / "docker-config"
    config.mkdir()
    for h in two_hosts.hosts:
        subprocess.run(["docker", "context", "create", f"mh-{h.name}", "--docker", f"host={h.url}"], check=True,
                       capture_output=True, env={**os.environ, "DOCKER_CONFIG": str(config)})
    by_context = ddpctl("ps", job, "--docker-hosts", "mh-a,mh-b", env=_hosts_env(two_hosts, DOCKER_CONFIG=str(config)))
    assert by_context.returncode == 0, by_context.stderr
    rows = [line.split() for line in by_context.stdout.splitlines()[1:]]
    assert [(r[2], r[-1]) for r in rows] == [(f"{job}-node-0", "mh-a"), (f"{job}-node-1", "mh-b")], by_context.stdout
    logs = ddpctl("logs", job, "--docker-hosts", urls, env=_hosts_env(two_hosts))
    assert logs.returncode == 0, logs.stderr
    assert all(f"rank-{r} | " in logs.stdout for r in range(4)), logs.stdout[-2000:]
    assert "node-1 rank-3 | " in logs.stdout
    down = ddpctl("down", job, env=env)
    assert down.returncode == 0 and f"job {job}: removed 2 container(s)" in down.stderr, down.stderr
    assert a.labelled(job) == [] and b.labelled(job) == []


@pytest.mark.parametrize("case", ["unreachable", "bad-scheme", "unknown-context", "socket-without-hosts"])
def test_bad_docker_host_is_one_line_and_leaves_nothing(two_hosts, cpu_image, job, case):
    a, _ = two_hosts.hosts
    second, hosts, code, message = {
        "unreachable": (f"unix://{two_hosts.root}/nowhere/docker.sock", True, 1, "cannot reach Docker host unix://"),
        "bad-scheme": ("http://10.216.0.2:2375", True, 2, "has scheme 'http', not one of unix, tcp, ssh"),
        "unknown-context": ("no-such-context-mh", True, 2, "there is no docker context named 'no-such-context-mh'"),
        "socket-without-hosts": (two_hosts.urls[1], False, 2, "is a socket on this machine"),
    }[case]
    args = ["--hosts", ",".join(two_hosts.addresses)] if hosts else []
    proc = ddpctl("up", "--name", job, "--nodes", "2", "--docker-hosts", f"{a.url},{second}", *args,
                  "--image", cpu_image, "--", "true", env=_hosts_env(two_hosts))
    assert proc.returncode == code and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_image_missing_on_one_host_and_not_pullable(two_hosts, cpu_image, job):
    a, b = two_hosts.hosts
    only_a = f"ddpctl/mh-only-a:{job}"
    a.docker("tag", cpu_image, only_a)
    try:
        proc = ddpctl("up", "--name", job, "--nodes", "2", "--docker-hosts", ",".join(two_hosts.urls), "--hosts",
                      ",".join(two_hosts.addresses), "--image", only_a, "--", "true", env=_hosts_env(two_hosts))
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert f"image {only_a} is not on Docker host {b.url} and pulling it there failed" in last, proc.stderr
        assert f"docker save {only_a} | docker -H {b.url} load" in last
        assert a.labelled(job) == [] and b.labelled(job) == []
    finally:
        a.docker("rmi", only_a, check=False)


def test_start_failure_on_the_second_host_removes_the_first_hosts_node(two_hosts, cpu_image, job):
    """All or nothing across hosts: node 0 is created and started on host a, node 1 fails to start on host b
    (its image of the same tag has no ddp-train-launch on PATH), and the job is removed from both hosts."""
    a, b = two_hosts.hosts
    tag = f"ddpctl/mh-split:{job}"
    a.docker("tag", cpu_image, tag)
    cid = b.docker("create", cpu_image, "true").stdout.strip()
    b.docker("commit", "--change", "ENV PATH=/usr/bin:/bin", cid, tag)
    b.docker("rm", cid)
    try:
        proc = ddpctl("up", "--name", job, "--nodes", "2", "--docker-hosts", ",".join(two_hosts.urls), "--hosts",
                      ",".join(two_hosts.addresses), "--image", tag, "--", "sleep", "60", env=_hosts_env(two_hosts))
        assert proc.returncode == 1, proc.stderr
        assert "has no 'ddp-train-launch'" in proc.stderr and "nothing was left behind" in proc.stderr, proc.stderr
        assert a.labelled(job) == [] and b.labelled(job) == []
    finally:
        for h in two_hosts.hosts:
            h.docker("rmi", tag, check=False)
