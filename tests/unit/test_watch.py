"""Progress records read back (ddpctl.watch): parsing, per-rank figures, ETA, the slowest rank, the status text
and JSON, the kept output of a job (kept_output: keep, rotate, prune, read back) and the live line."""

from __future__ import annotations

import io
import json
from importlib import resources

import jsonschema
import pytest

from ddpctl.joboutput import kept_output, live, records
from ddpctl.local.engine_interface import ContainerInfo
from ddpctl.watch import status
from job_records import summary, summary_line

SCHEMA = json.loads((resources.files("ddp_train") / "progress.schema.json").read_text(encoding="utf-8"))


def rec(rank, step, t, *, total=100, restart=0, st=0.5, rate=128.0, loss=1.0, ckpt=None, node=0):
    r = {"event": "progress", "version": 1, "time": t, "step": step, "total": total, "rank": rank, "world_size": 2,
         "local_rank": 0, "node": node, "host": "h", "restart": restart, "wall_time_s": 1.0, "epoch": 1,
         "epochs": 1, "samples_per_sec": rate, "step_time_s": st, "loss": loss, "lr": 0.1, "gpu_util": None,
         "gpu_mem_gb": None, "checkpoint": ckpt}
    jsonschema.Draft202012Validator(SCHEMA).validate(r)
    return "rank-%d | " % rank + json.dumps(r, separators=(",", ":"))


def test_parse_takes_records_and_summaries_and_ignores_everything_else():
    assert records.parse_event(rec(1, 5, 1.0), "progress")["step"] == 5
    assert records.parse_event(summary_line(steps=3), "summary") == summary(steps=3)
    # a summary line that lacks the schema's keys is no summary: kept as a plain line
    assert records.parse_event('{"event": "summary", "steps": 3}', "summary") is None
    for junk in ["", "loss 1.0", '{"event":"progress"', '{"event":"progress","step":"x"}', "[1, 2]",
                 '{"event":"epoch","step":1}', 'rank-0 | {"progress": 1}']:
        assert records.parse_event(junk, "progress") is None


def test_eta_step_and_slowest_rank():
    lines = [rec(0, 10, 100.0, st=0.5), rec(1, 10, 100.0, st=0.5), rec(0, 20, 105.0, st=0.5),
             rec(1, 18, 105.0, st=0.9, rate=71.0)]
    st = status.build(status.JobView("j", "docker", lines=lines, state="running"), now=105.0)
    by = {r["rank"]: r for r in st["ranks"]}
    # the rate is wall time over steps across the rank's records (rank 1: 8 steps in 5 s), not the last
    # record's own step time (0.9 s), so one slow or fast interval does not swing the ETA
    assert by[0]["eta_s"] == 40.0 and by[1]["eta_s"] == pytest.approx(51.2)
    assert by[1]["slowest"] and not by[0]["slowest"]
    p = st["progress"]
    assert (p["step"], p["total"], p["percent"], p["eta_s"], p["slowest_rank"]) == (18, 100, 18.0, 51.2, 1)
    # time passing since the last record counts down the ETA
    later = status.build(status.JobView("j", "docker", lines=lines, state="running"), now=115.0)
    assert later["progress"]["eta_s"] == pytest.approx(41.2)
    text = "\n".join(status.text(st))
    assert "step 18/100 (18.0%)" in text and "<- slowest" in text and "ETA 51s" in text


def test_step_time_from_two_records_when_the_program_gives_none():
    lines = [rec(0, 10, 100.0, st=None), rec(0, 30, 110.0, st=None)]
    rp = records.collect(lines)[0][0]
    assert rp.step_time() == 0.5 and rp.eta_s() == 35.0


def test_a_restart_resumes_from_the_checkpoint_step():
    lines = [rec(0, 40, 1.0, ckpt={"step": 30, "path": "/c/30.pt"}), rec(0, 30, 2.0, restart=1,
                                                                         ckpt={"step": 30, "path": "/c/30.pt"}),
             rec(0, 34, 3.0, restart=1, ckpt={"step": 30, "path": "/c/30.pt"})]
    st = status.build(status.JobView("j", "docker", lines=lines, state="running", restarts=1), now=3.0)
    assert st["ranks"][0]["step"] == 34 and st["ranks"][0]["restart"] == 1
    assert st["progress"]["checkpoint"] == {"step": 30, "path": "/c/30.pt"}


def test_no_records_still_says_state_restarts_exit_codes_and_output_age():
    nodes = [status.NodeView(0, "exited", 0, 1, "j-node-0", last_output=90.0),
             status.NodeView(1, "exited", 137, 1, "j-node-1", last_output=50.0)]
    st = status.build(status.JobView("j", "docker", nodes=nodes, lines=["hello"], restarts=1), now=100.0)
    assert st["records_seen"] is False and st["result"] == "failed" and st["state"] == "exited"
    assert [n["last_output_age_s"] for n in st["nodes"]] == [10.0, 50.0]
    text = status.text(st)
    assert text[0] == "job j: exited, failed, 1 restart(s)" and "no progress records seen" in text[-1]
    assert "137" in text[3] and "50s ago" in text[3]


class Engine:
    """The two calls kept_output makes, over containers held in memory (the real engine: tests/integration)."""

    def __init__(self):
        self.items: dict[str, tuple[ContainerInfo, list[str]]] = {}

    def add(self, cid, job, node, lines, *, state="exited", code=0, restarts=0):
        labels = {"ddpctl.job": job, "ddpctl.node-rank": str(node), "ddpctl.restarts": str(restarts)}
        cmd = ("ddp-train-launch", "--nproc-per-node", "1", "--node-rank", str(node), "--no-python", "ddp-train")
        info = ContainerInfo(cid, f"{job}-node-{node}", labels, state, None if state == "running" else code,
                             1000.0, command=cmd)
        self.items[cid] = (info, [f"2026-01-01T00:00:{i:02d}.000000000Z {t}" for i, t in enumerate(lines)])

    def containers(self, label=None, name=None):
        key, _, value = (label or "").partition("=")
        return [c for c, _ in self.items.values() if not label or c.labels.get(key) == value]

    def logs(self, cid, *, timestamps=False, **_):
        yield ("\n".join(self.items[cid][1]) + "\n").encode()


def test_kept_output_keeps_attempts_rotates_a_new_run_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    e = Engine()
    e.add("a0", "job", 0, ["start", rec(0, 10, 1.0)], code=137)
    assert kept_output.keep(e, "job") == tmp_path / "ddpctl" / "jobs" / "job"
    e.items.clear()
    e.add("b0", "job", 0, ["again", rec(0, 20, 2.0, restart=1), summary_line(images_per_sec=99.5)],
          restarts=1)
    folder = kept_output.keep(e, "job", removing=True)
    kept = kept_output.find("job")
    assert sorted(kept.lines) == [(0, 0), (1, 0)] and kept.meta["result"] == "succeeded"
    assert kept.meta["final_samples_per_sec"] == 99.5 and kept.meta["restarts"] == 1 and kept.meta["removed"]
    assert [t for _, t in kept.merged()][0] == "again"
    assert len((folder / "progress.jsonl").read_text().splitlines()) == 2
    # a new run of the same name moves the old folder aside
    e.items.clear()
    e.add("c0", "job", 0, ["third"], state="running")
    kept_output.keep(e, "job")
    names = sorted(p.name for p in (tmp_path / "ddpctl" / "jobs").iterdir())
    assert names[0] == "job" and names[1].startswith("job@") and kept_output.find("job").meta["result"] == "running"


def test_kept_output_prunes_the_oldest(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(kept_output, "MAX_JOBS", 2)
    for i in range(4):
        e = Engine()
        e.add(f"c{i}", f"j{i}", 0, ["x"])
        kept_output.keep(e, f"j{i}")
    assert sorted(k.meta["job"] for k in kept_output.all_kept()) == ["j2", "j3"]


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_live_line_on_a_terminal_and_nothing_without_one():
    out = Tty()
    line = live.LiveLine.on(out, restarts=1)
    assert live.consume(line, rec(0, 10, 1.0)) and not live.consume(line, "rank-0 | hello")
    line.write("node-0 rank-0 | hello\n")
    line.close()
    text = out.getvalue()
    assert "node-0 rank-0 | hello\nprogress: step 10/100 (10%), 128 samples/s, ETA 45s, 1 restart(s)" in text
    assert text.endswith("\r\x1b[K") and '"event"' not in text
    assert live.LiveLine.on(io.StringIO()) is None and live.consume(None, rec(0, 1, 1.0))


def test_up_tensorboard_puts_the_event_files_on_the_job_volume():
    from pathlib import Path

    from ddpctl.local.plan import plan_local
    from ddpctl.spec import spec_from_dict

    plan = plan_local(spec_from_dict({"name": "tb", "nodes": 2, "tensorboard": True}), cwd=Path("/tmp"))
    assert plan.checkpoint_volume == "tb-ckpt" and plan.max_restarts == 0
    for c in plan.containers:
        assert c.argv[-2:] == ("--tensorboard", "/checkpoints/tensorboard") and c.restart_argv is None
        assert any(m.target == "/checkpoints" and m.source == "tb-ckpt" for m in c.mounts)
    own = plan_local(spec_from_dict({"name": "tb", "tensorboard": True, "command": ["ddp-train", "--tensorboard",
                                                                                     "/x"]}), cwd=Path("/tmp"))
    assert own.containers[0].argv.count("--tensorboard") == 1


def test_one_fast_interval_does_not_swing_the_eta():
    lines = [rec(0, 10, 100.0, st=0.5), rec(0, 20, 105.0, st=0.5), rec(0, 30, 110.0, st=0.5),
             rec(0, 40, 110.5, st=0.05)]
    rp = records.collect(lines)[0][0]
    assert rp.step_time() == pytest.approx(0.35)  # 30 steps in 10.5 s, not the last interval's 0.05 s
    assert rp.eta_s() == pytest.approx(21.0)
