"""``ddpctl bench --resume DIR``: the state kept after every run, what a resumed call keeps and runs, and the
checks of its options and host. The programs are scripted here (their JSON lines as ddp-train prints them);
tests/distributed/test_bench_e2e.py resumes a matrix of real programs."""

import json

import pytest

from ddpctl.bench import BenchOptions, run_bench
from ddpctl.bench.programs import Runner, RunResult
from ddpctl.bench.resume import STATE_FILE
from ddpctl.errors import UsageError

OPTIONS = BenchOptions(workloads=("toy",), gpus=(1, 2), repeat=2, steps=3, warmup=1)


class Interrupted(Exception):
    """The machine's limit on one call: the process is gone mid-matrix."""


class Scripted(Runner):
    """Answers each program with the JSON line the real one prints; stops after ``stop_after`` training runs."""

    runtime = "scripted"

    def __init__(self, gpus: int = 0, stop_after: int | None = None, trainer: str | None = None) -> None:
        self.gpus, self.stop_after, self.ran, self.trainer = gpus, stop_after, [], trainer

    def run(self, launch, *, timeout, log=None, tick=None) -> RunResult:
        if launch.module.endswith("sysinfo"):
            line = {"event": "sysinfo", "gpu_count": self.gpus, "torch": "2.11.0",
                    "gpus": [{"index": 0, "name": "GPU", "memory_gb": 80}] * self.gpus,
                    **({"source": self.trainer} if self.trainer else {})}
        elif launch.module.endswith("allreduce_probe"):
            self.ran.append(launch.name)
            line = {"event": "allreduce_probe", "correct": True, "backend": "gloo", "dtype": "float32",
                    "results": [{"bytes": 1 << 20, "iters": 20, "time_us": 1000.0, "algbw_gbps": 1.05,
                                 "busbw_gbps": 1.05}], "peak_busbw_gbps": 1.05, "max_bytes": 1 << 20,
                    "busbw_at_max_gbps": 1.05}
        else:
            if self.stop_after is not None and len([r for r in self.ran if "probe" not in r]) >= self.stop_after:
                raise Interrupted
            self.ran.append(launch.name)
            ranks = launch.nprocs
            line = {"event": "summary", "images_per_sec": 100.0 * ranks, "step_time_s": 0.32, "global_batch": 32 * ranks,
                    "params": 1000, "step_mode": "eager", "sync_check": "pass"}
        return RunResult(0, json.dumps(line) + "\n", "", 1.0)


def test_a_matrix_stopped_mid_way_goes_on_where_it_stopped(tmp_path):
    """Killed after 2 of 4 training runs: the state holds the probe and those 2; the resumed call runs the other
    2 only, and the report has all 4 with both calls listed."""
    out = tmp_path / "r"
    first = Scripted(stop_after=2)
    with pytest.raises(Interrupted):
        run_bench(OPTIONS, out, runner=first, command="ddpctl bench -o r", plots=False)
    state = json.loads((out / STATE_FILE).read_text())
    assert [(r["key"], r["repeat"]) for r in state["runs"]] == [("toy/device/single/1", 0), ("toy/device/ddp/2", 0)]
    assert [p["world_size"] for p in state["probes"]] == [2]

    second = Scripted()
    rep, _ = run_bench(OPTIONS, out, runner=second, command="ddpctl bench --resume r", plots=False, resume=True)
    assert second.ran == ["toy/device/single/1", "toy/device/ddp/2"]  # repeat 2 of each, nothing measured again
    assert [len([r for r in c["runs"] if r["ok"]]) for c in rep["cells"]] == [2, 2]
    assert rep["command"] == "ddpctl bench -o r" and [c["command"] for c in rep["resumed"]] == ["ddpctl bench --resume r"]
    assert rep["resumed"][0]["runs"] == 2 and rep["forecast"]["validation"][0]["key"] == "toy/device/ddp/2"
    md = (out / "report.md").read_text()
    assert "- resumed (`--resume`): 1 more call(s)" in md


def test_a_finished_matrix_resumed_runs_nothing(tmp_path):
    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), plots=False)
    again = Scripted()
    rep, _ = run_bench(OPTIONS, out, runner=again, plots=False, resume=True)
    assert again.ran == [] and all(r["ok"] for c in rep["cells"] for r in c["runs"])


def test_the_budgets_skips_run_again_failures_are_kept(tmp_path):
    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), plots=False)
    state = json.loads((out / STATE_FILE).read_text())
    state["runs"][1]["error"] = "skipped: the --time-budget was spent before it started"
    state["runs"][2]["error"], state["runs"][2]["returncode"] = "exit 1: boom", 1
    (out / STATE_FILE).write_text(json.dumps(state))
    again = Scripted()
    rep, _ = run_bench(OPTIONS, out, runner=again, plots=False, resume=True)
    assert again.ran == [state["runs"][1]["key"]]
    assert [r["error"] for c in rep["cells"] for r in c["runs"] if r["error"]] == ["exit 1: boom"]


def test_other_options_or_another_host_are_refused(tmp_path):
    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), plots=False)
    with pytest.raises(UsageError, match=r"--repeat differs from the earlier call's \(2 there, 3 here\)"):
        run_bench(BenchOptions(workloads=("toy",), gpus=(1, 2), repeat=3, steps=3, warmup=1), out, runner=Scripted(),
                  plots=False, resume=True)
    # the budget and the per-run limit may change between calls
    run_bench(BenchOptions(workloads=("toy",), gpus=(1, 2), repeat=2, steps=3, warmup=1, time_budget_s=50,
                           cell_timeout_s=60), out, runner=Scripted(), plots=False, resume=True)
    with pytest.raises(UsageError, match=r"measured on 0 x CPU, this host has 2 x GPU"):
        run_bench(OPTIONS, out, runner=Scripted(gpus=2), plots=False, resume=True)
    with pytest.raises(UsageError, match="no bench-state.json there"):
        run_bench(OPTIONS, tmp_path / "empty", runner=Scripted(), plots=False, resume=True)


def test_each_call_records_its_code_and_a_resume_on_other_code_says_so(tmp_path):
    """Every call records the fingerprint of the ddpctl and ddp_train code it ran; a resumed call on other code
    (here: the earlier call's fingerprint edited) says in a note that the report mixes both, and report.md names
    the resumed call's code."""
    import io

    from ddpctl.bench.progress import BenchProgress
    from ddpctl.bench.resume import source_change, source_fingerprint

    here = source_fingerprint()
    assert len(here) == 12 and int(here, 16) >= 0 and source_fingerprint() == here
    out = tmp_path / "r"
    with pytest.raises(Interrupted):
        run_bench(OPTIONS, out, runner=Scripted(stop_after=2), command="ddpctl bench -o r", plots=False)
    state = json.loads((out / STATE_FILE).read_text())
    assert [c["source"] for c in state["calls"]] == [here]
    assert source_change(state, here) is None and source_change({"calls": [{"created": "x"}]}, here) is None
    state["calls"][0]["source"] = "0123456789ab"
    (out / STATE_FILE).write_text(json.dumps(state))
    said = io.StringIO()
    rep, _ = run_bench(OPTIONS, out, runner=Scripted(), plots=False, resume=True,
                       progress=BenchProgress(stream=said, tty=False))
    assert (f"the code differs from an earlier call's (source 0123456789ab there, {here} here)" in said.getvalue())
    assert rep["source"] == "0123456789ab" and rep["resumed"][0]["source"] == here
    md = (out / "report.md").read_text()
    assert "(source 0123456789ab)" in md and f"(source {here}: other code than the first call's)" in md


def test_rebuild_makes_the_report_again_from_the_state_alone(tmp_path):
    """A finished matrix rebuilt: report.json as the run wrote it. One stopped mid-way: the measured runs, the
    rest listed as not run yet (skipped, not failed), and nothing is run."""
    from ddpctl.bench import rebuild_report

    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), command="ddpctl bench -o r", plots=False)
    written = json.loads((out / "report.json").read_text())
    rep, files = rebuild_report(out, plots=False)
    rebuilt = rep.pop("rebuilt")
    assert rep == written and set(rebuilt) == {"created", "source"} and len(rebuilt["source"]) == 12
    assert json.loads((out / "report.json").read_text())["rebuilt"] == rebuilt
    assert [f.name for f in files] == ["report.json", "report.md"]
    assert "- rebuilt (`ddpctl bench rebuild`): " in (out / "report.md").read_text()

    cut = tmp_path / "cut"
    with pytest.raises(Interrupted):
        run_bench(OPTIONS, cut, runner=Scripted(stop_after=3), command="ddpctl bench -o cut", plots=False)
    rep, _ = rebuild_report(cut, plots=False)
    runs = [(c["key"], r["repeat"], r["ok"], r.get("skipped"), r["error"]) for c in rep["cells"] for r in c["runs"]]
    assert runs == [("toy/device/single/1", 0, True, False, None), ("toy/device/single/1", 1, True, False, None),
                    ("toy/device/ddp/2", 0, True, False, None),
                    ("toy/device/ddp/2", 1, False, True, "skipped: not run yet (ddpctl bench --resume runs it)")]


def test_rebuild_writes_nothing_when_the_report_would_be_too_large_or_invalid(tmp_path, monkeypatch):
    """The report made from a state is checked before anything is written: larger than bench compare would
    read (the bound lowered here), or not valid against report.schema.json (a run's start-up made -5 s: no report
    has such a cell): a one-line UsageError, report.json and report.md as they were; a run of 0 img/s is refused
    with the state."""
    from ddpctl.bench import compare, rebuild_report

    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), command="ddpctl bench -o r", plots=False)
    report_json = (out / "report.json").read_bytes()
    (out / "report.json").unlink()  # (the old report is read first, for its hardware section)
    monkeypatch.setattr(compare, "MAX_REPORT_BYTES", 1000)
    with pytest.raises(UsageError, match="would be larger than 0 MiB; nothing written"):
        rebuild_report(out, plots=False)
    monkeypatch.undo()
    assert not (out / "report.json").exists()
    (out / "report.json").write_bytes(report_json)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    state = json.loads((out / STATE_FILE).read_text())
    state["runs"][0]["summary"]["startup_s"] = -5
    (out / STATE_FILE).write_text(json.dumps(state))
    before[STATE_FILE] = (out / STATE_FILE).read_bytes()
    with pytest.raises(UsageError, match="holds figures no report can"):
        rebuild_report(out, plots=False)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    state["runs"][0]["summary"]["images_per_sec"] = 0
    (out / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(UsageError, match="is not a state this ddpctl writes .runs/0/summary/images_per_sec"):
        rebuild_report(out, plots=False)


def test_a_state_with_what_real_runs_write_reads_back(tmp_path):
    """What ddp-train and the runner write stays readable: a failed sync check's list of every mismatched name
    of a ResNet-50 (320 names), long reasons, an error of a killed run, a summary of null figures."""
    from ddpctl.bench.resume import load

    out = tmp_path / "r"
    run_bench(OPTIONS, out, runner=Scripted(), command="ddpctl bench -o r", plots=False)
    state = json.loads((out / STATE_FILE).read_text())
    state["runs"][0]["summary"].update(sync_check="fail", sync_mismatched=[f"layer{i}.weight" for i in range(320)],
                                       comm_reason="link 4.8 GB/s busbw < 25: slow " + "(auto ...) " * 200,
                                       train_loss=None, step_time_s=None)  # a diverged loss (NaN) reads as null
    state["runs"][1].update(returncode=-9, error="exit -9: " + "killed | " * 2000, summary=None)
    (out / STATE_FILE).write_text(json.dumps(state).replace('"train_loss": null', '"train_loss": NaN'))
    assert load(out) == state


def test_the_fingerprint_follows_the_trainer_that_ran(tmp_path):
    """The ddp_train a call runs says its own fingerprint in its sysinfo line (another --python or --image,
    another trainer): the call's source changes with it, and is source_fingerprint of it."""
    from ddpctl.bench.resume import source_fingerprint

    seen = []
    for i, trainer in enumerate(("aaaaaaaaaaaa", "bbbbbbbbbbbb", None)):
        rep, _ = run_bench(OPTIONS, tmp_path / str(i), runner=Scripted(trainer=trainer), plots=False)
        seen.append(rep["source"])
        assert rep["source"] == source_fingerprint(trainer)
    assert len(set(seen)) == 3
