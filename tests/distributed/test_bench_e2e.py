"""`ddpctl bench` end to end on CPU: real torchrun/gloo processes running ddp-train's toy workload and the
all-reduce probe, then the report's tables, its JSON schema and its PNG files are checked."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ddpctl.bench.plots import SIZE_PX
from ddpctl.bench.report import schema
from ddpctl.bench.runner import MIN_RUN_S

pytestmark = pytest.mark.distributed

CLI = [sys.executable, "-c", "import sys; sys.argv[0] = 'ddpctl'; from ddpctl.cli.main import main; main()"]


def ddpctl(*args, timeout=180):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert len(data) > 2000  # a drawn figure, not an empty image
    return width, height


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "out"
    res = ddpctl("bench", "--workloads", "toy", "--strategies", "single,ddp", "--gpus", "1,2", "--warmup", "1",
                 "--steps", "3", "--batch-size", "16", "--probe-max", "1m", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(out / "report.md")
    assert "bench [1/3] all-reduce probe x2" in res.stderr  # plain progress lines when not on a terminal
    return out


def test_report_json_matches_schema(report_dir):
    rep = json.loads((report_dir / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    cells = {c["key"]: c for c in rep["cells"]}
    assert set(cells) == {"toy/device/single/1", "toy/device/ddp/2"}
    single, ddp = cells["toy/device/single/1"], cells["toy/device/ddp/2"]
    assert single["ok"] and ddp["ok"]
    assert ddp["sync_check"] == "pass" and ddp["global_batch"] == 32
    assert ddp["scaling_efficiency"] == pytest.approx(
        ddp["images_per_sec"]["median"] / (2 * single["images_per_sec"]["median"]))
    assert ddp["diagnosis"]["label"] in {"compute-bound", "communication-bound", "input-pipeline-bound",
                                         "overhead-bound"}
    assert ddp["interconnect"]["grad_bytes"] == ddp["param_count"] * 4
    probe = rep["interconnect"][0]
    assert probe["ok"] and probe["backend"] == "gloo" and probe["max_bytes"] == 1 << 20
    for row in probe["results"]:  # 2 ranks: busbw = algbw x 2(2-1)/2
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])
    assert rep["hardware"]["gpu_count"] == 0 and rep["hardware"]["torch"]
    assert sorted(rep["plots"]) == ["efficiency_vs_gpus.png", "forecast.png", "strategies.png",
                                    "throughput_vs_gpus.png"]
    # the CPU report forecasts too: the ddp cell from the model without it, and nodes of gloo processes
    (val,) = rep["forecast"]["validation"]
    assert val["key"] == "toy/device/ddp/2" and val["modelled"] and val["plan"]["reducer"] == "ddp"
    assert val["measured_efficiency"] == pytest.approx(ddp["scaling_efficiency"])
    assert {r["link"] for r in rep["forecast"]["rows"]} >= {"none", "25gbe", "400gbe"}


def test_report_md_tables(report_dir):
    md = (report_dir / "report.md").read_text()
    rep = json.loads((report_dir / "report.json").read_text())
    ddp = next(c for c in rep["cells"] if c["strategy"] == "ddp")
    for heading in ("## Hardware", "## Headline", "## Results", "## Scaling against the interconnect",
                    "## Interconnect (all-reduce probe)", "## Plots"):
        assert heading in md
    assert ("| workload | pipeline | strategy | procs | batch/GPU / global | img/s | batch time ms | epoch s | "
            "speedup | scaling eff. | x classic | GPU util % | GPU mem GiB | sync | mode | start-up s |") in md
    assert ddp["step_mode"] == "eager" and ddp["summary"]["step_mode_reason"] == "CUDA graphs need a GPU"
    assert f"| toy | device | ddp | 2 | 16/32 | {ddp['images_per_sec']['median']:,.0f} |" in md
    assert f"**{ddp['diagnosis']['label']}**" in md
    assert "| 1 MiB |" in md


def test_pngs_are_images_of_the_expected_size(report_dir):
    for name in ("throughput_vs_gpus.png", "efficiency_vs_gpus.png", "strategies.png", "forecast.png"):
        assert png_size(report_dir / name) == SIZE_PX


def test_compare_a_report_with_itself(report_dir):
    rep = report_dir / "report.json"
    res = ddpctl("bench", "compare", str(rep), str(rep))
    assert res.returncode == 0, res.stderr
    assert "| toy/device/ddp/2 |" in res.stdout and "| 1.00x |" in res.stdout
    assert "| x2 at max size |" in res.stdout


def test_a_failing_cell_is_reported_and_exits_1(tmp_path):
    out = tmp_path / "fail"
    res = ddpctl("bench", "--workloads", "toy", "--strategies", "single", "--gpus", "1", "--steps", "2",
                 "--no-probe", "--no-plots", "--train-arg=--no-such-flag", "-o", str(out))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("error: 1 benchmark run(s) failed")
    md = (out / "report.md").read_text()
    assert "| toy | device | single | 1 | 32/32 | FAILED |" in md
    assert "toy/device/single/1 repeat 0: exit 2" in md
    assert (out / "logs").is_dir()


def test_probe_busbw_factor_with_three_ranks():
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                          "-m", "ddp_train.allreduce_probe", "--min-bytes", "64K", "--max-bytes", "256K",
                          "--iters", "3", "--warmup", "1"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data["event"] == "allreduce_probe" and data["world_size"] == 3 and data["correct"] is True
    assert [r["bytes"] for r in data["results"]] == [64 << 10, 256 << 10]
    for r in data["results"]:
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 4 / 3)
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9)


def test_time_budget_skips_runs_exit_0_and_still_writes_the_report(tmp_path):
    """Runs the budget leaves no room for are skipped, not failed: listed in the report, exit 0."""
    out = tmp_path / "budget"
    res = ddpctl("bench", "--workloads", "toy", "--gpus", "1,2", "--no-plots", "--time-budget", "1", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "0 failed run(s), 3 skipped by the time budget" in res.stderr
    rep = json.loads((out / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    not_run = "skipped: the --time-budget was spent before it started"
    assert [(r["error"], r["skipped"]) for c in rep["cells"] for r in c["runs"]] == [(not_run, True)] * 2
    assert rep["interconnect"] == [{"world_size": 2, "link": "local", "ok": False, "error": not_run}]
    md = (out / "report.md").read_text()
    assert not_run in md and "| toy | device | single | 1 | 32/32 | skipped |" in md


def test_the_old_gpu_spelling_still_runs_the_device_pipeline_with_a_warning(tmp_path):
    """--pipelines gpu (the device pipeline's name before ddp-train's was taken): deprecated for one release."""
    out = tmp_path / "old"
    res = ddpctl("bench", "--workloads", "toy", "--strategies", "single", "--gpus", "1", "--pipelines", "gpu",
                 "--no-probe", "--no-plots", "--time-budget", "1", "-o", str(out))
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if "deprecated" in line]
    assert warnings == ["warning: --pipelines gpu is deprecated and goes in the next release: use device (the same "
                        "pipeline, named as ddp-train's --data-pipeline)"]
    rep = json.loads((out / "report.json").read_text())
    assert [c["key"] for c in rep["cells"]] == ["toy/device/single/1"] and rep["options"]["pipelines"] == ["device"]


def test_a_run_the_budget_cuts_is_skipped_a_hung_one_failed(tmp_path):
    """Stopped at the limit the budget left (shorter than --cell-timeout): skipped, exit 0. Stopped at
    --cell-timeout itself: it hung, failed, exit 1."""
    base = ["bench", "--workloads", "toy", "--strategies", "single", "--gpus", "1", "--warmup", "0", "--steps",
            "100000", "--no-probe", "--no-plots"]
    # both limits short (the budget just above what a run must have left to start): each run trains until killed
    res = ddpctl(*base, "--time-budget", str(MIN_RUN_S + 1), "--cell-timeout", "600", "-o", str(tmp_path / "cut"))
    assert res.returncode == 0, res.stderr
    run = json.loads((tmp_path / "cut" / "report.json").read_text())["cells"][0]["runs"][0]
    assert run["skipped"] and run["error"].startswith("skipped: the --time-budget left"), run
    res = ddpctl(*base, "--cell-timeout", "8", "-o", str(tmp_path / "hung"))
    assert res.returncode == 1
    run = json.loads((tmp_path / "hung" / "report.json").read_text())["cells"][0]["runs"][0]
    assert not run["skipped"] and run["error"].startswith("timed out after"), run


def test_two_node_socket_emulation_beside_the_local_cells(tmp_path):
    """--links socket: the ddp cell again as two torchrun agents of one process each, a static rendezvous on
    127.0.0.1 (gloo here; NCCL's socket settings on GPUs), its link probed with and without ddpctl's socket
    settings, reported beside the local cell, with what would gain."""
    out = tmp_path / "socket"
    res = ddpctl("bench", "--workloads", "toy", "--gpus", "1,2", "--links", "local,socket", "--no-plots",
                 "-o", str(out), timeout=400)
    assert res.returncode == 0, res.stderr
    rep = json.loads((out / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    by_key = {c["key"]: c for c in rep["cells"]}
    sock = by_key["toy/device/ddp/2/socket"]
    assert sock["ok"] and sock["link"] == "socket" and sock["summary"]["world_size"] == 2
    assert sock["baseline_key"] == "toy/device/single/1" and by_key["toy/device/ddp/2"]["link"] == "local"
    assert [(p["world_size"], p["link"], p["ok"]) for p in rep["interconnect"]] == [
        (2, "local", True), (2, "socket", True), (2, "socket-nccl-defaults", True)]
    assert [a["key"] for a in rep["link_advice"]][:1] == ["toy/device/ddp/2/socket"]
    md = (out / "report.md").read_text()
    assert "| toy | device | ddp (2 nodes, sockets) | 2 |" in md and "## Link-bound cells: what would gain" in md
    log = next((out / "logs").glob("*ddp-2-socket*")).read_text()
    assert log.count("--nnodes 2") == 2 and "--master-addr 127.0.0.1" in log


def test_four_emulated_nodes_over_sockets(tmp_path):
    """--socket-nodes 4: the 4-process ddp cell as four torchrun agents of one process each (gloo here), keyed
    .../socket/4-nodes, reported as 4 nodes; no probe of its own (the probe runs over two nodes)."""
    out = tmp_path / "four"
    res = ddpctl("bench", "--workloads", "toy", "--strategies", "single,ddp", "--gpus", "1,4", "--links", "socket",
                 "--socket-nodes", "4", "--warmup", "1", "--steps", "3", "--batch-size", "16", "--no-probe",
                 "--no-plots", "-o", str(out), timeout=400)
    assert res.returncode == 0, res.stderr
    rep = json.loads((out / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    four = {c["key"]: c for c in rep["cells"]}["toy/device/ddp/4/socket/4-nodes"]
    assert four["ok"] and four["nodes"] == 4 and four["summary"]["world_size"] == 4
    assert "| toy | device | ddp (4 nodes, sockets) | 4 |" in (out / "report.md").read_text()
    log = next((out / "logs").glob("*ddp-4-socket-4-nodes*")).read_text()
    assert log.count("--nnodes 4") == 4


def test_resume_runs_what_the_budget_skipped_into_the_same_report(tmp_path):
    """A call the budget stopped before any run, resumed with the same options (another budget): the probe and
    both cells run in the second call, into the same report, which lists both calls."""
    out = tmp_path / "resume"
    matrix = ["--workloads", "toy", "--strategies", "single,ddp", "--gpus", "1,2", "--warmup", "1", "--steps", "3",
              "--batch-size", "16", "--probe-max", "1m", "--no-plots"]
    res = ddpctl("bench", *matrix, "--time-budget", "1", "-o", str(out))
    assert res.returncode == 0 and "3 skipped by the time budget" in res.stderr, res.stderr
    res = ddpctl("bench", *matrix, "--repeat", "2", "--resume", str(out))
    assert res.returncode == 2 and "--repeat differs from the earlier call's (1 there, 2 here)" in res.stderr
    res = ddpctl("bench", *matrix, "--resume", str(out))
    assert res.returncode == 0 and "0 skipped by the time budget" in res.stderr, res.stderr
    rep = json.loads((out / "report.json").read_text())
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    assert [(c["key"], [r["ok"] for r in c["runs"]]) for c in rep["cells"]] == [
        ("toy/device/single/1", [True]), ("toy/device/ddp/2", [True])]
    assert rep["interconnect"][0]["ok"] and "--time-budget 1" in rep["command"]
    assert [c["runs"] for c in rep["resumed"]] == [2]
    res = ddpctl("bench", *matrix, "--resume", str(out))  # nothing left: nothing runs, the report stays whole
    assert res.returncode == 0 and "kept from the earlier call" in res.stderr and "img/s" not in res.stderr
