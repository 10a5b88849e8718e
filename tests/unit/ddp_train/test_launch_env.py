"""ddp_train.runtime.distributed.detect: the launch read from torchrun's environment (or the flags) is checked:
a rank outside the world, a world of no process, a local rank below 0 or past LOCAL_WORLD_SIZE, a port that is
not one, text where a number goes. Each is one usage line, exit 2 (permanent: no restart policy retries it), not
the retryable 128 of a master that "did not open" after --connect-timeout."""

from __future__ import annotations

import pytest

from ddp_train.__main__ import main
from ddp_train.config.settings import parse_args
from ddp_train.errors import EXIT_USAGE, TrainError
from ddp_train.runtime.distributed import detect

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--quiet", "--progress-records", "off", "--connect-timeout", "1"]
GOOD = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
LAUNCH_VARS = (*GOOD, "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")


@pytest.fixture
def env(monkeypatch):
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)

    def set_env(**changes):
        for name, value in {**GOOD, **changes}.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
    return set_env


def test_a_sane_environment_is_taken(env):
    env(LOCAL_WORLD_SIZE="2")
    launch = detect(parse_args([]))
    assert (launch.mode, launch.rank, launch.world_size, launch.local_rank) == ("env", 1, 2, 1)
    assert launch.master == ("127.0.0.1", 29500)


@pytest.mark.parametrize("changes,needle", [
    ({"RANK": "3"}, "RANK=3 is out of range: each of the 2 processes (WORLD_SIZE=2) has a rank from 0 to 1"),
    ({"RANK": "2"}, "RANK=2 is out of range"),
    ({"RANK": "-1"}, "RANK=-1 is out of range"),
    ({"WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE=0 is out of range: the number of processes, from 1 to"),
    ({"WORLD_SIZE": "-4"}, "WORLD_SIZE=-4 is out of range"),
    ({"WORLD_SIZE": str(2**31)}, f"WORLD_SIZE={2**31} is out of range"),
    ({"MASTER_PORT": "99999"}, "MASTER_PORT=99999 is out of range: a TCP port, from 1 to 65535"),
    ({"MASTER_PORT": "0"}, "MASTER_PORT=0 is out of range"),
    ({"MASTER_PORT": "abc"}, "MASTER_PORT='abc' is not an integer"),
    ({"RANK": "one"}, "RANK='one' is not an integer"),
    ({"RANK": "\x1b[2J1"}, "RANK='\\x1b[2J1' is not an integer"),
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK=-1 is out of range"),
    ({"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=2 is out of range: this process's index on its "
                                                   "node, from 0 to 1 (LOCAL_WORLD_SIZE=2)"),
    ({"LOCAL_RANK": "1.5"}, "LOCAL_RANK='1.5' is not an integer"),
    ({"MASTER_ADDR": ""}, "MASTER_ADDR='' is not a host name or address"),
    ({"MASTER_ADDR": "host\x1b]0;x\x07"}, "MASTER_ADDR='host\\x1b]0;x\\x07' is not a host name"),
    ({"MASTER_PORT": None}, "env:// launch needs MASTER_PORT in the environment"),
])
def test_a_bad_environment_is_a_usage_error(env, changes, needle):
    env(**changes)
    with pytest.raises(TrainError) as e:
        detect(parse_args([]))
    assert e.value.code == EXIT_USAGE and not e.value.retryable
    assert needle in str(e.value) and "\n" not in str(e.value) and "\x1b" not in str(e.value)


def test_a_tcp_init_method_port_out_of_range_is_a_usage_error(env):
    env(RANK=None, WORLD_SIZE=None, MASTER_ADDR=None, MASTER_PORT=None, LOCAL_RANK="x")
    for port in ("99999", "0", "http"):
        config = parse_args(["--init-method", f"tcp://127.0.0.1:{port}", "--rank", "0", "--world-size", "1"])
        with pytest.raises(TrainError, match="needs a host and a port from 1 to 65535") as e:
            detect(config)
        assert e.value.code == EXIT_USAGE
    config = parse_args(["--init-method", "tcp://127.0.0.1:29500", "--rank", "0", "--world-size", "1"])
    with pytest.raises(TrainError, match="LOCAL_RANK='x' is not an integer"):
        detect(config)


@pytest.mark.parametrize("changes", [{"RANK": "3"}, {"WORLD_SIZE": "0", "RANK": "0"}, {"MASTER_PORT": "99999"}])
def test_the_entry_point_exits_2_at_once_with_one_line(env, changes, capsys):
    """Before: rank 3 of 2 (or port 99999) waited --connect-timeout for a master and exited 128, retryable."""
    env(**changes)
    assert main(TINY) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("ddp-train: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "did not open" not in err
