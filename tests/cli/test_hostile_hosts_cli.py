"""Hostile host names and the commands that hints suggest.

Docker hosts from ``--docker-hosts``, a job file's ``docker_hosts:`` and ``$DDPCTL_DOCKER_HOSTS`` pass the same
host rule as ``--hosts`` (an option-looking or shell-looking host never reaches ssh, the launch plan or a
hint), split the one way every host list is split; every command a message suggests is quoted for the shell.
Refusals: exit 2, one line, nothing on stdout, no engine contacted, no ssh run.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from ddpctl.cli.main import main


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    import ddpctl.dockerengine

    def tripwire(*a, **k):
        raise AssertionError("a Docker Engine was contacted")

    monkeypatch.setattr(ddpctl.dockerengine, "connect", tripwire)
    monkeypatch.setattr(subprocess, "run", tripwire)  # no ssh -G, no ssh


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line(code, out, err, needle):
    assert code == 2 and out == "" and "Traceback" not in err, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


BAD_HOSTS = [
    ("ssh://-oProxyCommand=touch%20pwned", "not a host name"),
    ("ssh://-oProxyCommand=x@gpu1", "not a user name"),
    ("tcp://-x:2376", "not a host name"),
    ("ssh://gpu1;id", "not a host name"),
    ("tcp://a$(id):2376", "not a host name"),
    ("tcp://user:pw@gpu1:2376", "credentials"),
    ("ssh://me:pw@gpu1", "credentials"),
    ("ssh://gpu1/path", "has a path"),
    ("ftp://gpu1", "scheme"),
    ("-H", "context name"),
    ("unix://relative.sock", "absolute socket path"),
]


@pytest.mark.parametrize("host,needle", BAD_HOSTS, ids=[h for h, _ in BAD_HOSTS])
def test_a_bad_docker_host_is_refused_from_the_flag_the_file_and_the_environment(capsys, tmp_path, monkeypatch,
                                                                                 host, needle):
    one_line(*cli(capsys, "up", "-n", "2", f"--docker-hosts=tcp://gpu0:2376,{host}", "--dry-run"), needle)
    job = tmp_path / "job.yaml"
    job.write_text(f"nodes: 2\ndocker_hosts: ['tcp://gpu0:2376', {host!r}]\n")
    one_line(*cli(capsys, "up", "-f", str(job), "--dry-run"), needle)
    monkeypatch.setenv("DDPCTL_DOCKER_HOSTS", f"tcp://gpu0:2376,{host}")
    for command in ("ps", "logs", "down"):
        args = [command] if command == "ps" else [command, "job"]
        one_line(*cli(capsys, *args), needle)
    assert not Path("pwned").exists()


def test_host_lists_split_the_same_way_everywhere():
    from ddpctl import rules
    from ddpctl.dockerengine import split_hosts
    from ddpctl.spec import load_spec

    text = "tcp://a:2376, tcp://b:2376\ttcp://c:2376,,"
    assert split_hosts(text) == tuple(rules.split_list(text)) == ("tcp://a:2376", "tcp://b:2376", "tcp://c:2376")
    spec = load_spec(None, {"nodes": 3, "docker_hosts": text, "hosts": "a, b\tc"})
    assert spec.docker_hosts == split_hosts(text) and spec.hosts == ("a", "b", "c")


def test_hints_quote_every_value_for_the_shell():
    from ddpctl.images.push import push_failure
    from ddpctl.local.executor.attach import failure_message
    from ddpctl.local.executor.several_hosts import docker_cli

    evil = "x; touch pwned"
    hint = failure_message(evil, 1, 3, None).fix
    assert shlex.quote(evil) in hint and f"down {evil}'" not in hint
    assert docker_cli(evil) == f"docker --context {shlex.quote(evil)}"
    fix = push_failure("reg.example:5000/a/b:1", "unauthorized: authentication required").fix
    assert "'docker login reg.example:5000'" in fix
