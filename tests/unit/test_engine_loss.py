"""An attached job whose Docker Engine goes away: the log pumps hand every failure to the main flow (no thread
traceback), a bounded wait for the engine, then a restart or one line with exit 69 and the resume command;
a run that exits 0 without saying it finished fails; ``logs --follow`` survives a broken stream.

The engine here is scripted in memory (a daemon restart cannot be scripted on the shared engine); the same
endings on the real engine, with a dockerd of the test's own that is really restarted or stopped, are in
tests/integration/test_engine_faults.py.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from ddpctl import launch
from ddpctl.dockerengine.hosts_engine import HostsEngine, NamedEngine
from ddpctl.errors import EngineError
from ddpctl.local import executor, restarts
from ddpctl.local.engine_interface import ContainerInfo, Engine
from ddpctl.local.executor import ending, stream
from ddpctl.local.plan import plan_local
from ddpctl.spec import spec_from_dict
from job_records import summary_line

CWD = Path("/home/u/proj")
BASE = 1_790_000_000.0
SUMMARY = "rank-0 | " + summary_line(steps=8, exit_code=0)


def _ts(sec: float) -> str:
    whole = int(sec)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{round((sec - whole) * 1e9):09d}Z"


class Daemon(Engine):
    """A scripted engine. ``attempts[restart][node] = (lines, exit code)``; ``outage = (node, after line k,
    seconds away (None: for good), what the nodes exit with when it is back (None: they kept running))``."""

    def __init__(self, attempts, outage=None, name="unix:///test.sock", down_after_exit=None):
        self.attempts, self.outage, self.name = attempts, outage, name
        self.down_after_exit = down_after_exit  # seconds the engine is away once attempt 0's nodes exited
        self.down_until = 0.0
        self.box: dict[str, dict] = {}
        self.removed: list[str] = []
        self.follows = 0

    def _down(self) -> bool:
        return time.monotonic() < self.down_until

    def _fail(self):
        raise ConnectionError("('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))")

    def check(self, endpoint=None, timeout=5.0, *, fresh=False):
        if self._down():
            self._fail()

    def ping(self): self.check()
    def image_exists(self, ref): return True
    def has_nvidia_runtime(self, image=None): return False
    def create_network(self, name, labels): return "net"
    def remove_network(self, id_or_name): pass
    def networks(self, label=None, name=None): return []
    def create_volume(self, name, labels): return name
    def remove_volume(self, name): pass
    def volumes(self, label=None, name=None): return []
    def chown_volume(self, name, image, owner, target): pass
    def start(self, cid): pass
    def stop(self, cid, timeout=5): pass

    def containers(self, label=None, name=None):
        if self._down():
            self._fail()
        return [self.inspect(c) for c in self.box if c not in self.removed]

    def create_container(self, request):
        cid = f"c{len(self.box)}"
        attempt = int(request["labels"].get(restarts.LABEL_RESTARTS, "0"))
        rank = int(request["labels"][launch.LABEL_NODE_RANK])
        lines, code = self.attempts[attempt][rank]
        self.box[cid] = {"name": request["name"], "lines": list(lines), "code": code, "rank": rank,
                         "attempt": attempt, "labels": request["labels"]}
        return cid

    def remove_container(self, cid):
        if self._down():
            self._fail()
        self.removed.append(cid)

    def inspect(self, cid):
        if self._down():
            self._fail()
        if cid in self.removed:
            return None
        b = self.box[cid]
        return ContainerInfo(cid, b["name"], labels=b["labels"], state="exited", exit_code=b["code"])

    def logs(self, cid, *, follow=False, tail=None, since=None, timestamps=False):
        if self._down():
            self._fail()
        self.follows += 1
        b = self.box[cid]
        lines = b["lines"][-tail:] if tail else b["lines"]

        def gen():
            for i, line in enumerate(lines):
                when = BASE + i * 0.001
                if since is not None and when < since:
                    continue
                if self._down():
                    self._fail()
                yield ((f"{_ts(when)} " if timestamps else "") + line + "\n").encode()
                if self.outage and b["attempt"] == 0 and self.outage[0] == b["rank"] and self.outage[1] == i:
                    node, _, away, code = self.outage
                    self.outage = None
                    self.down_until = time.monotonic() + (1e9 if away is None else away)
                    if code is not None:  # a daemon restart stops every container of the attempt
                        for other in self.box.values():
                            if other["attempt"] == 0:
                                other["code"] = code
                                del other["lines"][i + 1 if other is b else len(other["lines"]):]
                                other["lines"].append("ddp-train-launch: stopped by SIGTERM; the workers were stopped")
                    self._fail()
        return gen()

    def wait(self, cid):
        if self._down():
            self._fail()
        b = self.box[cid]
        if self.down_after_exit and b["attempt"] == 0 and b["rank"] == 1:
            self.down_until, self.down_after_exit = time.monotonic() + self.down_after_exit, None
        return b["code"]


def _lines(n, extra=()):
    return [f"rank-0 | epoch 1/1 step {i}/8 (global {i}) loss 1.0" for i in range(1, n + 1)] + list(extra)


OK0 = (_lines(8, [SUMMARY]), 0)
OK1 = (["rank-1 | fine"], 0)


@pytest.fixture
def no_thread_tracebacks(monkeypatch):
    seen: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args))
    yield seen
    assert seen == [], f"a thread raised: {[a.exc_value for a in seen]}"


def _run(engine, max_restarts=0, wait_s=2.0, nodes=2, argv=None, command=None):
    spec = {"name": "j", "nodes": nodes, "max_restarts": max_restarts}
    if command:
        spec["command"] = command
    plan = plan_local(spec_from_dict(spec), cwd=CWD)
    job = executor.create(plan, engine, secrets={})
    out, said = io.StringIO(), []
    finished = executor.supervise(job, engine, out=out, say=said.append, wait_s=wait_s,
                                  argv=argv or ["up", "--nodes", "2", "--name", "j", "--", "ddp-train"])
    return finished, said, out.getvalue()


def test_a_broken_stream_of_a_live_engine_reattaches_without_losing_or_repeating_a_line(no_thread_tracebacks):
    engine = Daemon([{0: OK0, 1: OK1}], outage=(0, 3, 0.0, None))  # the stream breaks, the engine answers
    finished, said, out = _run(engine)
    assert finished.failure is None, finished.failure
    steps = [ln for ln in out.splitlines() if "(global" in ln]
    assert len(steps) == 8 and len(set(steps)) == 8  # every line once
    assert said == []  # nothing to wait for


def test_a_daemon_restart_is_a_node_loss_that_restarts_the_job(no_thread_tracebacks):
    engine = Daemon([{0: (_lines(8), 0), 1: OK1}, {0: OK0, 1: OK1}], outage=(0, 4, 0.4, 143))
    finished, said, out = _run(engine, max_restarts=2)
    assert finished.failure is None and finished.restarts == 1
    assert said[0].startswith("lost the connection to the Docker Engine at unix:///test.sock (")
    assert "waiting up to 2 s for it to come back (DDPCTL_ENGINE_WAIT sets how long)" in said[0]
    assert said[1].startswith("the Docker Engine at unix:///test.sock answers again after ")
    assert said[2].startswith("restart 1/2: the Docker Engine at unix:///test.sock went away for ")
    assert "restarting all 2 nodes" in said[2]


def test_nodes_stopped_by_a_daemon_that_then_goes_away_count_as_an_engine_restart(no_thread_tracebacks):
    """A daemon that is stopping stops every container first, answering on the connections it has: the exit
    codes arrive before any stream breaks. The engine asked on a new connection then does not answer."""
    stopped = (_lines(4, ["ddp-train-launch: stopped by SIGTERM; the workers were stopped"]), 143)
    engine = Daemon([{0: stopped, 1: ([], 143)}, {0: OK0, 1: OK1}], down_after_exit=0.4)
    finished, said, _ = _run(engine, max_restarts=1)
    assert finished.failure is None and finished.restarts == 1
    assert said[0].startswith("lost the connection to the Docker Engine at unix:///test.sock (it did not answer "
                              "after the nodes stopped)")
    assert said[2].startswith("restart 1/1: the Docker Engine at unix:///test.sock went away for ")
    engine = Daemon([{0: stopped, 1: ([], 143)}], down_after_exit=0.4)
    finished, _, _ = _run(engine)
    assert finished.failure.exit_code == 69 and "went away for" in finished.failure.message


def test_a_daemon_restart_without_restarts_left_ends_with_the_step_and_the_resume_command(no_thread_tracebacks):
    engine = Daemon([{0: (_lines(8), 0), 1: OK1}], outage=(0, 4, 0.3, 143))
    argv = ["up", "--nodes", "2", "--max-restarts", "1", "-v", "/my ckpt:/checkpoints", "--", "ddp-train"]
    finished, said, _ = _run(engine, max_restarts=0, argv=argv)
    f = finished.failure
    assert f.exit_code == executor.EXIT_ENGINE_LOST == 69
    assert f.message.startswith("job j stopped at step 5: the Docker Engine at unix:///test.sock went away for ")
    assert "and stopped its nodes (node 0 (j-node-0) of job j exited with code 143" in f.message
    assert f.message.endswith("no checkpoints are kept without --max-restarts: run it again with: ddpctl up --nodes 2 "
                              "--max-restarts 1 -v '/my ckpt:/checkpoints' -- ddp-train")
    assert "\n" not in f.message


def test_the_resume_command_adds_resume_where_the_job_keeps_checkpoints():
    job = executor.Job(plan_local(spec_from_dict({"name": "j", "nodes": 2, "max_restarts": 1}), cwd=CWD), {}, None)
    assert ending.resume_argv(["up", "-n", "2", "--max-restarts", "1", "--", "ddp-train"], job) == \
        ["ddpctl", "up", "--resume", "-n", "2", "--max-restarts", "1", "--", "ddp-train"]
    plain = executor.Job(plan_local(spec_from_dict({"name": "j", "nodes": 2}), cwd=CWD), {}, None)
    assert ending.resume_argv(["up", "-n", "2"], plain) == ["ddpctl", "up", "-n", "2"]  # nothing to resume from


def test_an_engine_that_does_not_come_back_ends_the_job_in_bounded_time(no_thread_tracebacks):
    engine = Daemon([{0: (_lines(8), 0), 1: OK1}], outage=(0, 2, None, None))
    t0 = time.monotonic()
    finished, said, _ = _run(engine, max_restarts=2, wait_s=0.5)
    assert time.monotonic() - t0 < 10
    f = finished.failure
    assert f.exit_code == 69 and finished.restarts == 0
    assert f.message.startswith("job j stopped at step 3: the Docker Engine at unix:///test.sock went away (")
    assert "did not come back within 0 s" in f.message or "did not come back within 1 s" in f.message
    assert "when it is back, 'ddpctl down j' removes what is left there, or resume it from its last checkpoint " \
           "with: ddpctl up --resume --nodes 2" in f.message


def test_a_lost_host_is_named_and_the_job_is_removed_from_the_others(no_thread_tracebacks):
    a = Daemon([{0: OK0, 1: OK1}], name="ssh://gpu1")
    b = Daemon([{0: OK0, 1: (["rank-1 | a", "rank-1 | b", "rank-1 | c"], 0)}], outage=(1, 1, None, None),
               name="ssh://gpu2")
    hosts = HostsEngine([NamedEngine("ssh://gpu1", a, "10.0.0.1"), NamedEngine("ssh://gpu2", b, "10.0.0.2")])
    spec = spec_from_dict({"name": "j", "nodes": 2, "network": "host", "hosts": ["10.0.0.1", "10.0.0.2"],
                           "docker_hosts": ["ssh://gpu1", "ssh://gpu2"]})
    plan = plan_local(spec, cwd=CWD)
    job = executor.create(plan, hosts, secrets={})
    said: list[str] = []
    finished = executor.supervise(job, hosts, out=io.StringIO(), say=said.append, wait_s=0.3,
                                  argv=["up", "--docker-hosts", "ssh://gpu1,ssh://gpu2"])
    f = finished.failure
    assert f.exit_code == 69 and said[0].startswith("lost the connection to Docker host ssh://gpu2 (")
    assert "Docker host ssh://gpu2 went away" in f.message
    assert "its 1 container(s) on the other host(s) were removed" in f.message
    assert "'ddpctl down j --docker-hosts ssh://gpu1,ssh://gpu2' removes what is left there" in f.message
    assert a.removed and not b.removed


def test_nodes_that_exit_0_without_the_summary_record_fail_the_job():
    engine = Daemon([{0: (_lines(3), 0), 1: OK1}])
    finished, _, _ = _run(engine)
    assert finished.failure.exit_code == 1
    assert finished.failure.message.startswith("all 2 node(s) of job j exited 0 at step 3, but ddp-train printed "
                                               "no summary record, so the run did not finish")
    # another program has no record to print: every node's 0, with every line read, is its success
    engine = Daemon([{0: (["rank-0 | done"], 0), 1: OK1}])
    finished, _, _ = _run(engine, command=["python", "train.py"])
    assert finished.failure is None


def test_engine_wait_is_a_bounded_number_of_seconds():
    assert stream.engine_wait_s({}) == 60.0 and stream.engine_wait_s({"DDPCTL_ENGINE_WAIT": "2.5"}) == 2.5
    for bad in ("abc", "-1", "1e9"):
        with pytest.raises(Exception, match="DDPCTL_ENGINE_WAIT=.* is not a number of seconds"):
            stream.engine_wait_s({"DDPCTL_ENGINE_WAIT": bad})


def test_follow_survives_a_broken_stream(no_thread_tracebacks):
    engine = Daemon([{0: (["rank-0 | a", "rank-0 | b", "rank-0 | c"], 0), 1: (["rank-1 | x"], 0)}],
                    outage=(0, 0, 0.2, None))
    plan = plan_local(spec_from_dict({"name": "j", "nodes": 2}), cwd=CWD)
    executor.create(plan, engine, secrets={})
    said: list[str] = []
    got = list(executor.follow_logs(engine, "j", say=said.append, wait_s=2.0))
    assert sorted(got) == [(0, "rank-0 | a"), (0, "rank-0 | b"), (0, "rank-0 | c"), (1, "rank-1 | x")]
    assert said and said[-1].startswith("the Docker Engine at unix:///test.sock answers again")


def test_follow_ends_in_one_line_when_the_engine_does_not_come_back(no_thread_tracebacks):
    engine = Daemon([{0: (["rank-0 | a", "rank-0 | b"], 0), 1: (["rank-1 | x"], 0)}], outage=(0, 0, None, None))
    plan = plan_local(spec_from_dict({"name": "j", "nodes": 2}), cwd=CWD)
    executor.create(plan, engine, secrets={})
    with pytest.raises(EngineError) as got:
        list(executor.follow_logs(engine, "j", wait_s=0.3))
    assert "did not come back within" in str(got.value) and "\n" not in str(got.value)


def test_the_event_stream_shows_a_daemon_that_went_away_and_came_back(no_thread_tracebacks):
    """A daemon restart that is over before anything else noticed still breaks the job's event stream."""
    class Events(Daemon):
        def __init__(self):
            super().__init__([{0: OK0, 1: OK1}])
            self.opened = 0

        def events(self, endpoint, label):
            self.opened += 1
            assert label == "ddpctl.job=j"
            if self.opened == 1:
                def gen():
                    yield {"status": "start"}
                    raise ConnectionError("Connection aborted: the daemon went away")
                return gen()
            return iter(())  # reopened: ends at once, as a stream of a quiet job would not; stop here
    engine = Events()
    watch = stream.EngineWatch(engine, "ddpctl.job=j")
    try:
        deadline = time.monotonic() + 5
        got = []
        while not got and time.monotonic() < deadline:
            got = watch.breaks()
            time.sleep(0.05)
    finally:
        watch.close()
    assert got and got[0][0] == "unix:///test.sock" and "the daemon went away" in got[0][2]


def test_with_rm_the_checkpoint_volume_is_gone_so_the_command_runs_the_job_again():
    engine = Daemon([{0: (_lines(8), 0), 1: OK1}], outage=(0, 4, 0.3, 143))
    finished, _, _ = _run(engine, max_restarts=0, argv=["up", "--rm", "--nodes", "2", "--", "ddp-train"])
    assert finished.failure.message.endswith("run it again with: ddpctl up --rm --nodes 2 -- ddp-train")
    job = executor.Job(plan_local(spec_from_dict({"name": "j", "nodes": 2, "max_restarts": 1}), cwd=CWD), {}, None)
    assert "its checkpoints went with it (--rm): run it again with: ddpctl up --rm" in ending._again(["up", "--rm"], job)
    mine = executor.Job(plan_local(spec_from_dict({"name": "j", "nodes": 2, "max_restarts": 1,
                                                   "volumes": ["/nfs/ckpt:/checkpoints"]}), cwd=CWD), {}, None)
    assert ending._again(["up", "--rm"], mine).startswith("resume it from its last checkpoint with: ddpctl up --resume")
