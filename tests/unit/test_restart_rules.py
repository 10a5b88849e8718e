"""``ddpctl up --max-restarts``: the rules (ddpctl.local.restarts), the plan, and the restart loop.

The loop (executor.supervise) runs here against a scripted in-memory engine, so every decision (restart on a
retryable code, stop on a permanent one, the last allowed restart) is checked without Docker; the same loop
on the real engine with ddp-train is tests/integration/test_local_restarts.py.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddpctl import launch
from ddpctl.local import executor, restarts
from ddpctl.local.engine_interface import ContainerInfo, Engine, NetworkInfo, VolumeInfo
from ddpctl.local.plan import container_request, plan_local
from ddpctl.spec import spec_from_dict
from job_records import summary_line

CWD = Path("/home/u/proj")
LAUNCH = ("ddp-train-launch", "--nnodes", "2", "--no-python")


def test_ddp_train_writes_to_the_checkpoint_dir_and_resumes_on_restart():
    argv = LAUNCH + ("ddp-train", "--checkpoint-every", "5")
    assert restarts.first_argv(argv) == argv + ("--output-dir", "/checkpoints")
    assert restarts.restart_argv(argv) == argv + ("--output-dir", "/checkpoints", "--resume", "auto")
    # the user's own output dir stays; an explicit --resume PATH becomes auto on a restart (not the old file)
    own = LAUNCH + ("ddp-train", "--output-dir=out", "--resume", "out/ckpt-00000010.pt", "--seed", "3")
    assert restarts.first_argv(own) == own
    assert restarts.restart_argv(own) == LAUNCH + ("ddp-train", "--output-dir=out", "--seed", "3", "--resume", "auto")
    assert restarts.restart_argv(LAUNCH + ("ddp-train", "--resume=auto")) == \
        LAUNCH + ("ddp-train", "--output-dir", "/checkpoints", "--resume", "auto")
    # another program is left alone: it reads DDPCTL_CHECKPOINTS / DDPCTL_RESTART_COUNT
    mine = LAUNCH + ("python", "train.py", "--resume", "x")
    assert restarts.first_argv(mine) == restarts.restart_argv(mine) == mine


def test_checkpoint_cadence_note_and_retryable_codes():
    assert restarts.checkpoint_cadence_note(LAUNCH + ("ddp-train",)).startswith("note: ddp-train saves")
    assert restarts.checkpoint_cadence_note(LAUNCH + ("ddp-train", "--checkpoint-every", "5")) is None
    assert restarts.checkpoint_cadence_note(LAUNCH + ("ddp-train", "--checkpoint-interval=5m")) is None
    assert restarts.checkpoint_cadence_note(LAUNCH + ("python", "x.py")) is None
    assert [c for c in (1, 2, 17, 127, 128, 129, 137, 143) if restarts.retryable(c)] == [128, 129, 137, 143]


def test_plan_mounts_a_labelled_volume_and_torchrun_does_not_restart_on_its_own():
    spec = spec_from_dict({"name": "r", "nodes": 2, "max_restarts": 3})
    plan = plan_local(spec, cwd=CWD)
    assert plan.max_restarts == 3 and plan.checkpoint_volume == "r-ckpt"
    for c in plan.containers:
        first, again = container_request(c), container_request(c, restart=2)
        assert "--max-restarts" not in first["command"]  # ddpctl restarts the job, not torchrun
        assert first["command"][-2:] == ["--output-dir", "/checkpoints"]
        assert again["command"][-2:] == ["--resume", "auto"]
        assert {"type": "volume", "source": "r-ckpt", "target": "/checkpoints", "read_only": False} in first["mounts"]
        assert first["labels"][restarts.LABEL_RESTARTS] == "0" and again["labels"][restarts.LABEL_RESTARTS] == "2"
        assert first["environment"]["DDPCTL_CHECKPOINTS"] == "/checkpoints"
        assert (first["environment"]["DDPCTL_RESTART_COUNT"], again["environment"]["DDPCTL_RESTART_COUNT"]) == ("0", "2")
    shown = plan.to_dict()
    assert shown["max_restarts"] == 3 and shown["checkpoint_volume"]["name"] == "r-ckpt"
    assert shown["restart_command"][-2:] == ["--resume", "auto"]
    # other targets keep torchrun's own restarts (they render the same launch contract)
    assert "--max-restarts" in launch.local_nodes(spec)[0].argv


def test_a_directory_mounted_at_checkpoints_replaces_the_volume_and_no_restarts_change_nothing():
    spec = spec_from_dict({"name": "s", "nodes": 2, "max_restarts": 1, "volumes": ["/nfs/ckpt:/checkpoints"]})
    plan = plan_local(spec, cwd=CWD)
    assert plan.checkpoint_volume is None
    assert [m["source"] for m in container_request(plan.containers[0])["mounts"]] == ["/nfs/ckpt"]
    plain = plan_local(spec_from_dict({"name": "p", "nodes": 2}), cwd=CWD)
    req = container_request(plain.containers[0])
    assert plain.checkpoint_volume is None and "mounts" not in req and "max_restarts" not in plain.to_dict()
    assert restarts.LABEL_RESTARTS not in req["labels"] and "DDPCTL_RESTART_COUNT" not in req["environment"]
    assert req["command"] == list(launch.local_nodes(spec_from_dict({"name": "p", "nodes": 2}))[0].argv)


def test_retryable_reports_are_recognised_as_ddp_train_writes_them():
    from ddp_train.launcher import run as launcher

    src = (Path(launcher.__file__).parents[1] / "__main__.py").read_text()
    assert '"restart the job (exit code {code})"' in src  # the text RETRYABLE_ERROR reads
    text = ("ddp-train: error: lost a peer or timed out (RuntimeError: Connection closed by peer); retryable, "
            "restart the job (exit code 129)")
    assert executor.peer_loss_line("rank-0 | " + text)
    assert executor.peer_loss_line(launcher.RankFailure(0, 129, None, text, True, 0.0).line())
    assert executor.peer_loss_line(launcher.RankFailure(1, 137, None, "", False, 0.0).line())
    assert not executor.peer_loss_line(launcher.RankFailure(1, 3, None, "data missing", False, 0.0).line())
    assert not executor.peer_loss_line("rank-0 | epoch 1/1 step 3/64 (global 3) loss 2.3")


# ------------------------------------------------------------------------------- the loop, scripted engine


class ScriptedEngine(Engine):
    """Each attempt (restart count) of each node: the lines it prints and its exit code."""

    def __init__(self, attempts: list[dict[int, tuple[list[str], int]]]) -> None:
        self.attempts = attempts
        self.created: list[dict] = []
        self.removed: list[str] = []
        self.info: dict[str, dict] = {}

    def ping(self): pass
    def image_exists(self, ref): return True
    def has_nvidia_runtime(self, image=None): return False
    def create_network(self, name, labels): return "net"
    def remove_network(self, id_or_name): pass
    def networks(self, label=None, name=None): return [NetworkInfo("net", "n")]
    def create_volume(self, name, labels): return name
    def remove_volume(self, name): pass
    def volumes(self, label=None, name=None): return [VolumeInfo("v")]
    def chown_volume(self, name, image, owner, target): pass
    def start(self, cid): pass
    def stop(self, cid, timeout=5): pass
    def containers(self, label=None, name=None): return []

    def create_container(self, request):
        cid = f"c{len(self.created)}"
        self.created.append(request)
        attempt = int(request["labels"].get(restarts.LABEL_RESTARTS, "0"))
        rank = int(request["labels"][launch.LABEL_NODE_RANK])
        script = self.attempts[attempt][rank]
        self.info[cid] = {"name": request["name"], "script": script[:2], "gone": script[2:] == ("gone",)}
        return cid

    def remove_container(self, cid):
        self.removed.append(cid)

    def inspect(self, cid):
        if self.info[cid].get("gone"):
            return None
        return ContainerInfo(cid, self.info[cid]["name"], state="exited", exit_code=self.info[cid]["script"][1])

    def logs(self, cid, *, follow=False, tail=None, since=None, timestamps=False):
        lines = self.info[cid]["script"][0]
        return iter([("\n".join(lines) + "\n").encode()] if lines else [])

    def wait(self, cid):
        return self.info[cid]["script"][1]


OK = (["rank-0 | ok", "rank-0 | " + summary_line(exit_code=0)], 0)
KILLED = ([], 137)
PEER = (["ddp-train-launch: rank 0 failed (exit code 129, lost a peer): ddp-train: error: lost a peer or timed "
         "out (x); retryable, restart the job (exit code 129)"], 129)


def _run(attempts, max_restarts):
    spec = spec_from_dict({"name": "j", "nodes": 2, "max_restarts": max_restarts})
    engine = ScriptedEngine(attempts)
    plan = plan_local(spec, cwd=CWD)
    job = executor.create(plan, engine, secrets={})
    out, said = io.StringIO(), []
    finished = executor.supervise(job, engine, out=out, say=said.append)
    return finished, said, out.getvalue(), engine


def test_a_killed_node_restarts_the_job_which_then_succeeds():
    finished, said, out, engine = _run([{0: PEER, 1: KILLED}, {0: PEER, 1: KILLED}, {0: OK, 1: OK}], 3)
    assert finished.failure is None and finished.restarts == 2
    assert len(said) == 2 and said[0].startswith("restart 1/3: node 1 (j-node-1) of job j exited with code 137")
    assert "lost a peer" not in out  # the restart line says it once
    assert [r["labels"][restarts.LABEL_RESTARTS] for r in engine.created] == ["0", "0", "1", "1", "2", "2"]
    assert engine.created[-1]["command"][-2:] == ["--resume", "auto"]
    assert len(engine.removed) == 4  # each restart replaced both containers


def test_a_permanent_exit_code_is_not_restarted():
    bad = (["ddp-train-launch: rank 1 failed (exit code 3): ddp-train: error: no data"], 3)
    finished, said, out, _ = _run([{0: PEER, 1: bad}], 3)
    assert said == [] and finished.restarts == 0
    text = finished.failure.message
    assert "exited with code 3: ddp-train: error: no data (a permanent exit code, below 128: not restarted)" in text
    assert finished.failure.exit_code == 3


def test_the_last_allowed_restart_ends_the_job_in_one_line():
    finished, said, _, _ = _run([{0: PEER, 1: KILLED}] * 3, 2)
    assert len(said) == 2 and finished.restarts == 2
    assert finished.failure.message.startswith("job j failed after its last allowed restart (2 of --max-restarts 2): "
                                               "node 1 (j-node-1) of job j exited with code 137 (killed)")
    assert "volume j-ckpt" in finished.failure.message and finished.failure.exit_code == 137


@pytest.mark.parametrize("max_restarts", [0])
def test_no_restarts_fail_fast_as_before(max_restarts):
    finished, said, out, _ = _run([{0: PEER, 1: KILLED}], max_restarts)
    assert said == [] and finished.failure.message.startswith("node 1 (j-node-1) of job j exited with code 137")
    assert "lost a peer" in out  # nothing is hidden when the job does not restart


def test_a_job_removed_while_it_runs_is_not_restarted():
    """`ddpctl down` from another shell force-removes the containers (137): the attached up must not bring the
    job back."""
    finished, said, _, engine = _run([{0: ([], 137, "gone"), 1: ([], 137, "gone")}], 3)
    assert said == [] and len(engine.created) == 2
    assert finished.failure.message == "job j was removed while it ran ('ddpctl down'): not restarted"
