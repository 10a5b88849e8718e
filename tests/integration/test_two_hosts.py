"""A job across two Docker hosts, on the real engine: the per-host compose files from
``ddpctl render compose --hosts`` run with docker-compose 1.29.2.

Everything here is real: two network namespaces joined by a veth pair (10.216.0.1 and 10.216.0.2), a dockerd
in each (twohost.py), the CPU image loaded into both, containers with host networking, torchrun's static
rendezvous from host b to host a over the veth link and gloo between four processes. Nothing is a stand-in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from itest_helpers import DDPCTL, ddpctl, missing_part
from procs import drain
from twohost import TwoHosts

TRAIN = ["ddp-train", "--max-steps", "5"]


# one pair of fixed network namespaces and daemons at a time (the names and 10.216.0.0/24 are fixed)
pytestmark = pytest.mark.xdist_group("two_hosts")


@pytest.fixture(scope="module")
def two_hosts(engine, cpu_image):
    problem = None
    if os.geteuid() != 0:
        problem = "not root (network namespaces and a dockerd each need root)"
    elif not (shutil.which("dockerd") or os.path.exists("/usr/sbin/dockerd")):
        problem = "no dockerd binary"
    elif not (shutil.which("ip") and shutil.which("nsenter")):
        problem = "no 'ip' (iproute2) or 'nsenter' (util-linux)"
    elif not shutil.which("openssl"):
        problem = "no 'openssl' (the daemons' TLS certificates are made with it)"
    if problem:
        missing_part(f"no two-host fixture: {problem}")
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


# ------------------------------------------------------------------ tcp:// with TLS, ssh:// (remoteaccess.py)
# The daemons' tcp:// and ssh:// addresses exist only inside the namespaces: ddpctl runs on host a's network
# (two_hosts.client), as a user would on a machine of that LAN; host b is across the veth link.

# The environment's CA bundle is set on purpose: requests lets it replace docker-py's TLS CA unless ddpctl
# keeps its own (docker/docker-py#2433), and pip or a company proxy often sets it.
CA_BUNDLE = {"REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
             "CURL_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt"}


def _remote(two_hosts, *args: str, timeout: float = 400, **extra: str) -> subprocess.CompletedProcess:
    """``ddpctl ARGS`` on host a's network, with no default engine and no TLS settings unless given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_") and k != "DDPCTL_DOCKER_HOSTS"}
    env.update({"NO_COLOR": "1", "DOCKER_HOST": "unix:///nonexistent/ddpctl-test-no-default-engine.sock", **extra})
    return two_hosts.client(DDPCTL, *args, env=env, timeout=timeout)


def _tls(two_hosts, cert_path=None) -> dict[str, str]:
    return {"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(cert_path or two_hosts.pki.certs), **CA_BUNDLE}


def _ssh(two_hosts) -> dict[str, str]:
    if two_hosts.ssh is None:
        missing_part("no sshd: run scripts/ci-setup-ssh.sh")
    return two_hosts.ssh.env()


def _assert_ran_and_passed(up, job: str) -> None:
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    assert f"job {job}: 2 node(s) on 2 Docker host(s), world size 4" in up.stderr, up.stderr
    summaries = _summaries(up.stdout)
    assert summaries and summaries[-1]["sync_check"] == "pass" and summaries[-1]["world_size"] == 4, up.stdout[-2000:]
    assert "node-1 rank-2 | " in up.stdout and "node-1 rank-3 | " in up.stdout


def _ps_rows(ps) -> list[tuple[str, str]]:
    assert ps.returncode == 0, ps.stderr
    return [(r[2], r[-1]) for r in (line.split() for line in ps.stdout.splitlines()[1:])]


@pytest.fixture(scope="module")
def tls_contexts(two_hosts, tmp_path_factory):
    """DOCKER_CONFIG with contexts mh-tls-a / mh-tls-b made by the docker CLI (host=tcp://...,ca=,cert=,key=)."""
    config = tmp_path_factory.mktemp("docker-config")
    certs = two_hosts.pki.certs
    for h in two_hosts.hosts:
        subprocess.run(["docker", "context", "create", f"mh-tls-{h.name}", "--docker",
                        f"host={h.tcp_url},ca={certs}/ca.pem,cert={certs}/cert.pem,key={certs}/key.pem"],
                       check=True, capture_output=True, env={**os.environ, "DOCKER_CONFIG": str(config)})
    return str(config)


def test_up_over_tcp_with_tls_then_ps_logs_down(two_hosts, cpu_image, job):
    """DOCKER_TLS_VERIFY / DOCKER_CERT_PATH as for the docker CLI; no --hosts: the addresses come from the URLs."""
    a, b = two_hosts.hosts
    urls = f"{a.tcp_url},{b.tcp_url}"
    tls = _tls(two_hosts)
    up = _remote(two_hosts, "up", "--name", job, "--nodes", "2", "--nproc-per-node", "2", "--docker-hosts", urls,
                 "--image", cpu_image, "--", *TRAIN, **tls)
    _assert_ran_and_passed(up, job)
    assert a.labelled(job) == [f"{job}-node-0"] and b.labelled(job) == [f"{job}-node-1"]
    args = json.loads(b.docker("inspect", f"{job}-node-1").stdout)[0]["Args"]
    assert args[args.index("--master-addr") + 1] == a.addr, args
    ps = _remote(two_hosts, "ps", job, **tls, DDPCTL_DOCKER_HOSTS=urls)
    assert _ps_rows(ps) == [(f"{job}-node-0", a.tcp_url), (f"{job}-node-1", b.tcp_url)], ps.stdout
    logs = _remote(two_hosts, "logs", job, "--docker-hosts", urls, **tls)
    assert logs.returncode == 0 and "node-1 rank-3 | " in logs.stdout, logs.stderr
    down = _remote(two_hosts, "down", job, "--docker-hosts", urls, **tls)
    assert down.returncode == 0 and f"job {job}: removed 2 container(s)" in down.stderr, down.stderr
    assert a.labelled(job) == [] and b.labelled(job) == []


def test_up_through_tls_docker_contexts(two_hosts, cpu_image, job, tls_contexts):
    """Contexts carry their own TLS material: no DOCKER_TLS_VERIFY / DOCKER_CERT_PATH in the environment."""
    a, b = two_hosts.hosts
    ctx = {"DOCKER_CONFIG": tls_contexts, **CA_BUNDLE}
    up = _remote(two_hosts, "up", "--name", job, "--nodes", "2", "--nproc-per-node", "2", "--docker-hosts",
                 "mh-tls-a,mh-tls-b", "--image", cpu_image, "--", *TRAIN, **ctx)
    _assert_ran_and_passed(up, job)
    ps = _remote(two_hosts, "ps", job, "--docker-hosts", "mh-tls-a,mh-tls-b", **ctx)
    assert _ps_rows(ps) == [(f"{job}-node-0", "mh-tls-a"), (f"{job}-node-1", "mh-tls-b")], ps.stdout
    down = _remote(two_hosts, "down", job, "--docker-hosts", "mh-tls-a,mh-tls-b", **ctx)
    assert down.returncode == 0 and f"job {job}: removed 2 container(s)" in down.stderr, down.stderr
    assert a.labelled(job) == [] and b.labelled(job) == []


@pytest.mark.parametrize("case", ["no-certs", "no-tls-settings", "wrong-ca", "client-cert-of-another-ca"])
def test_bad_tls_is_one_line_and_leaves_nothing(two_hosts, cpu_image, job, tls_contexts, tmp_path, case):
    """Host a is a good context, host b a tcp:// URL whose TLS settings (the environment's) are wrong."""
    a, b = two_hosts.hosts
    pki = two_hosts.pki
    mixed = tmp_path / "mixed"  # the right CA, but a client certificate the daemons do not trust
    mixed.mkdir()
    shutil.copy(pki.certs / "ca.pem", mixed / "ca.pem")
    for name in ("cert.pem", "key.pem"):
        shutil.copy(pki.wrong_ca / name, mixed / name)
    env, message = {
        "no-certs": (_tls(two_hosts, pki.empty), f"DOCKER_CERT_PATH={pki.empty} has no ca.pem, cert.pem, key.pem"),
        "no-tls-settings": (CA_BUNDLE, "(it speaks TLS and this client does not); set DOCKER_TLS_VERIFY=1"),
        "wrong-ca": (_tls(two_hosts, pki.wrong_ca), f"not signed by the CA in {pki.wrong_ca}/ca.pem"),
        "client-cert-of-another-ca": (_tls(two_hosts, mixed), f"the daemon refused the client certificate {mixed}/cert.pem"),
    }[case]
    proc = _remote(two_hosts, "up", "--name", job, "--nodes", "2", "--docker-hosts", f"mh-tls-a,{b.tcp_url}",
                   "--image", cpu_image, "--", *TRAIN, DOCKER_CONFIG=tls_contexts, **env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach Docker host {b.tcp_url}"), proc.stderr
    assert message in lines[0], lines[0]
    assert a.labelled(job) == [] and b.labelled(job) == []


def test_single_engine_over_tls_and_ssh_from_docker_host(two_hosts, cpu_image):
    """DOCKER_HOST alone (no --docker-hosts): the same TLS rules, and ssh:// without paramiko."""
    a, b = two_hosts.hosts
    marker = f"mh-single-{uuid.uuid4().hex[:6]}"
    b.docker("create", "--name", marker, "--label", "app.kubernetes.io/managed-by=ddpctl", "--label",
             f"ddpctl.job={marker}", cpu_image, "true")
    try:
        over_tls = _remote(two_hosts, "ps", marker, **_tls(two_hosts), DOCKER_HOST=b.tcp_url)
        assert over_tls.returncode == 0 and marker in over_tls.stdout, over_tls.stderr
        over_ssh = _remote(two_hosts, "ps", marker, **_ssh(two_hosts), DOCKER_HOST=b.ssh_url)
        assert over_ssh.returncode == 0 and marker in over_ssh.stdout, over_ssh.stderr
        version = b.docker("version", "--format", "{{.Server.Version}}").stdout.strip()
        for url, env in ((b.tcp_url, _tls(two_hosts)), (b.ssh_url, _ssh(two_hosts))):  # doctor's probe too
            doctor = _remote(two_hosts, "doctor", **env, DOCKER_HOST=url)
            line = next((ln for ln in doctor.stdout.splitlines() if " docker: " in ln), doctor.stdout + doctor.stderr)
            assert line.startswith("ok") and f"Docker Engine {version} " in line and url in line, line
        refused = _remote(two_hosts, "ps", **_ssh(two_hosts), DOCKER_HOST=f"ssh://root@{b.addr}:2200")
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "port 2200: Connection refused" in refused.stderr, refused.stderr
    finally:
        b.docker("rm", "-f", marker, check=False)


def _dial_stdio_sessions(two_hosts) -> list[str]:
    """The ssh clients and remote ``docker system dial-stdio`` processes of the test's hosts still running."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()
            if "dial-stdio" in line and ("ssh" in line or str(two_hosts.root) in line or "docker system" in line)]


def test_up_over_ssh_then_ps_down(two_hosts, cpu_image, job, tmp_path):
    """Host a through a ~/.ssh/config alias no host can resolve (the node address must be its HostName), host b
    through a URL with a port; ``ps`` also through ssh docker contexts. No paramiko: ddpctl runs this
    machine's ssh."""
    from remoteaccess import ALIAS_A

    a, b = two_hosts.hosts
    hosts = f"ssh://root@{ALIAS_A},{b.ssh_url}"
    ssh = _ssh(two_hosts)
    up = _remote(two_hosts, "up", "--name", job, "--nodes", "2", "--nproc-per-node", "2", "--docker-hosts", hosts,
                 "--image", cpu_image, "--", *TRAIN, **ssh)
    _assert_ran_and_passed(up, job)
    args = json.loads(b.docker("inspect", f"{job}-node-1").stdout)[0]["Args"]
    assert args[args.index("--master-addr") + 1] == a.addr, args  # not the alias
    ps = _remote(two_hosts, "ps", job, **ssh, DDPCTL_DOCKER_HOSTS=hosts)
    assert _ps_rows(ps) == [(f"{job}-node-0", f"ssh://root@{ALIAS_A}"), (f"{job}-node-1", b.ssh_url)], ps.stdout
    config = tmp_path / "docker-config"
    for name, url in (("mh-ssh-a", a.ssh_url), ("mh-ssh-b", b.ssh_url)):
        subprocess.run(["docker", "context", "create", name, "--docker", f"host={url}"], check=True,
                       capture_output=True, env={**os.environ, "DOCKER_CONFIG": str(config)})
    by_context = _remote(two_hosts, "ps", job, "--docker-hosts", "mh-ssh-a,mh-ssh-b", **ssh, DOCKER_CONFIG=str(config))
    assert _ps_rows(by_context) == [(f"{job}-node-0", "mh-ssh-a"), (f"{job}-node-1", "mh-ssh-b")], by_context.stdout
    down = _remote(two_hosts, "down", job, **ssh, DDPCTL_DOCKER_HOSTS=hosts)
    assert down.returncode == 0 and f"job {job}: removed 2 container(s)" in down.stderr, down.stderr
    assert a.labelled(job) == [] and b.labelled(job) == []
    end = time.monotonic() + 10  # every ssh connection ended with ddpctl (no client or remote session left)
    while _dial_stdio_sessions(two_hosts) and time.monotonic() < end:
        time.sleep(0.2)
    assert _dial_stdio_sessions(two_hosts) == []


def test_ctrl_c_over_ssh_removes_the_job_from_both_hosts(two_hosts, cpu_image, job):
    """Ctrl-C at a terminal signals ddpctl's whole process group: the ssh connections, in sessions of their own,
    survive it, so ddpctl can still stop and remove the job on both hosts."""
    a, b = two_hosts.hosts
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env.update(NO_COLOR="1", DOCKER_HOST="unix:///nonexistent.sock", **_ssh(two_hosts))
    up = subprocess.Popen(["nsenter", f"--net=/run/netns/{a.netns}", DDPCTL, "up", "--name", job, "--nodes", "2",
                           "--docker-hosts", f"{a.ssh_url},{b.ssh_url}", "--image", cpu_image, "--", "sleep", "300"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not all(h.docker("ps", "-q", "--filter", f"label=ddpctl.job={job}", "--filter", "status=running",
                               check=False).stdout.strip() for h in two_hosts.hosts):
            assert up.poll() is None and time.monotonic() < end, up.stderr.read() if up.poll() is not None else "slow"
            time.sleep(0.5)
        os.killpg(up.pid, signal.SIGINT)  # what the terminal does
        _, err = up.communicate(timeout=120)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 130, err
    assert "stopped and removed" in err, err
    assert a.labelled(job) == [] and b.labelled(job) == []


@pytest.mark.parametrize("case", ["refused", "unknown-host-key"])
def test_unreachable_ssh_host_is_one_line_and_leaves_nothing(two_hosts, cpu_image, job, case):
    from remoteaccess import ALIAS_B_UNKNOWN_KEY

    a, b = two_hosts.hosts
    second, reason, fix = {
        "refused": (f"ssh://root@{b.addr}:2200", "Connection refused", f"make 'ssh -p 2200 root@{b.addr} docker version' work"),
        "unknown-host-key": (f"ssh://root@{ALIAS_B_UNKNOWN_KEY}", "Host key verification failed",
                             f"make 'ssh root@{ALIAS_B_UNKNOWN_KEY} docker version' work"),
    }[case]
    proc = _remote(two_hosts, "up", "--name", job, "--nodes", "2", "--docker-hosts", f"{a.ssh_url},{second}",
                   "--image", cpu_image, "--", *TRAIN, **_ssh(two_hosts))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach Docker host {second} (ssh: "), proc.stderr
    assert reason in lines[0] and fix in lines[0], lines[0]
    assert a.labelled(job) == [] and b.labelled(job) == []


# ------------------------------------------------------------------------------------- a host lost for good


def test_a_host_stopped_mid_job_ends_it_naming_the_host_and_down_cleans_it_when_back(two_hosts, cpu_image, job):
    """Host b's daemon is stopped (as 'systemctl stop docker' does) while the job trains and does not come back
    within DDPCTL_ENGINE_WAIT: the job ends with exit 69 naming host b, its node on host a is removed, and once
    host b is back 'ddpctl down' removes what was left there."""
    from attached import Up, no_traceback

    a, b = two_hosts.hosts
    urls = ",".join(two_hosts.urls)
    up = Up(["--name", job, "--nodes", "2", "--docker-hosts", urls, "--hosts", ",".join(two_hosts.addresses),
             "--image", cpu_image, "--", "ddp-train", "--epochs", "1"],
            {**os.environ, **_hosts_env(two_hosts), "DDPCTL_ENGINE_WAIT": "5"})
    up.wait_step(3)
    try:
        t0 = time.monotonic()
        two_hosts.stop_daemon(b)
        code = up.finish(timeout=180)
        print(f"ddpctl up ended {time.monotonic() - t0:.1f} s after host b's daemon was stopped")
        assert code == 69, up.out()
        no_traceback(up)
        last = up.err.strip().splitlines()[-1]
        assert re.match(rf"error: job {job} stopped at step \d+: Docker host {re.escape(b.url)} went away \(", last), last
        assert "did not come back within 5 s; its 1 container(s) on the other host(s) were removed" in last, last
        assert f"when it is back, 'ddpctl down {job} --docker-hosts {urls}' removes what is left there" in last, last
        assert a.labelled(job) == []
    finally:
        two_hosts.start_daemon(b)
    assert b.labelled(job) == [f"{job}-node-1"]  # left there while the host was away
    down = ddpctl("down", job, "--docker-hosts", urls, env=_hosts_env(two_hosts))
    assert down.returncode == 0 and "removed 1 container(s)" in down.stderr, down.stderr
def test_watch_a_job_on_two_hosts_status_restart_and_kept_output(two_hosts, cpu_image, job, tmp_path):
    """status across two Docker hosts: step up, ETA down; a node killed on host b restarts the job, which goes on
    from its checkpoint; after down, logs gives the same lines and status the final result."""
    a, b = two_hosts.hosts
    urls = ",".join(two_hosts.urls)
    env = _hosts_env(two_hosts, DDPCTL_DOCKER_HOSTS=urls)
    train = ["ddp-train", "--workload", "toy", "--train-size", "1024", "--test-size", "64", "--batch-size", "32",
             "--epochs", "1", "--no-eval", "--log-interval", "1", "--checkpoint-every", "3", "--output-dir",
             "/checkpoints", "--debug-step-sleep", "0.5"]
    up = subprocess.Popen([DDPCTL, "up", "--name", job, "--nodes", "2", "--docker-hosts", urls, "--hosts",
                           ",".join(two_hosts.addresses), "--image", cpu_image, "--max-restarts", "1",
                           # one checkpoint directory both hosts see (both daemons run on this machine)
                           "-v", f"{tmp_path}:/checkpoints", "--", *train],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})

    def status(check=True) -> dict:
        p = ddpctl("status", job, "--json", env=env, timeout=60)
        assert p.returncode == 0 or not check, p.stderr
        return json.loads(p.stdout) if p.returncode == 0 else {"progress": None}

    def until(test, what, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = test()
            if got:
                return got
            if up.poll() is not None:
                out, err = drain(up)
                raise AssertionError(f"up exited {up.returncode} before {what}:\n{out[-2000:]}\n{err[-2000:]}")
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}: {status(False)}")

    try:
        first = until(lambda: (s := status(False))["progress"] and s["progress"]["step"] >= 2 and s, "records")
        assert {n["host"] for n in first["nodes"]} == set(two_hosts.urls) and len(first["ranks"]) == 2
        # the ETA follows the recent step rate, so one read may tick up under load; it must come down as steps go on
        until(lambda: (s := status())["progress"]["step"] >= first["progress"]["step"] + 2
               and s["progress"]["eta_s"] < first["progress"]["eta_s"] and s, "more steps and a lower ETA")
        until(lambda: status()["progress"]["checkpoint"], "a checkpoint")
        b.docker("kill", f"{job}-node-1")
        after = until(lambda: (s := status())["restarts"] == 1 and s["ranks"] and
                      all(r["restart"] == 1 for r in s["ranks"]) and s, "progress after the restart")
        ckpt = after["progress"]["checkpoint"]["step"]
        assert ckpt % 3 == 0 and after["progress"]["step"] > ckpt
        out, err = up.communicate(timeout=400)
        assert up.returncode == 0, out[-2000:] + err[-2000:]
    finally:
        if up.poll() is None:  # a failed check above: stop the job as a user would (Ctrl-C), then take it down
            up.send_signal(signal.SIGINT)
            try:
                up.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.communicate(timeout=30)
            ddpctl("down", job, env=env, timeout=120)
    assert '"event":"progress"' not in out  # not a terminal: the records are not printed
    final = status()
    assert final["result"] == "succeeded" and final["summary"]["steps"] == 16 and final["restarts"] == 1
    before = ddpctl("logs", job, env=env)
    down = ddpctl("down", job, env=env)
    assert down.returncode == 0 and "its output is kept in" in down.stderr, down.stderr
    after_down = ddpctl("logs", job, env=env)
    assert after_down.returncode == 0 and after_down.stdout == before.stdout and before.stdout
    gone = status()
    assert gone["source"] == "kept" and gone["result"] == "succeeded" and gone["progress"]["step"] == 16


def test_tensorboard_on_two_hosts_needs_one_shared_checkpoint_directory(two_hosts, cpu_image, job, tmp_path):
    """Without a directory both hosts see at /checkpoints: one line, nothing created. With one (both daemons here
    share this machine's file system), every node gets DDPCTL_TENSORBOARD in it: a script other than ddp-train
    writes there from both hosts."""
    base = ["up", "--name", job, "--nodes", "2", "--docker-hosts", ",".join(two_hosts.urls), "--hosts",
            ",".join(two_hosts.addresses), "--image", cpu_image, "--tensorboard"]
    refused = ddpctl(*base, "--", "true", env=_hosts_env(two_hosts))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "--tensorboard on several Docker hosts needs one checkpoint directory" in refused.stderr
    assert "-v /shared/ckpt:/checkpoints" in refused.stderr and "Traceback" not in refused.stderr
    assert [h.labelled(job) for h in two_hosts.hosts] == [[], []]
    shared = tmp_path / "shared"
    shared.mkdir()
    script = ("import os; d = os.environ['DDPCTL_TENSORBOARD']; os.makedirs(d, exist_ok=True); "
              "open(os.path.join(d, 'rank-' + os.environ['RANK']), 'w').write(os.environ['RANK'])")
    up = ddpctl(*base, "-v", f"{shared}:/checkpoints", "--rm", "--", "python", "-c", script,
                env=_hosts_env(two_hosts), timeout=400)
    assert up.returncode == 0, up.stderr[-2000:]
    assert sorted(p.name for p in (shared / "tensorboard").iterdir()) == ["rank-0", "rank-1"]
    assert [h.labelled(job) for h in two_hosts.hosts] == [[], []]
