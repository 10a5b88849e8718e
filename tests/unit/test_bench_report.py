"""report.json / report.md / compare from given measurements (the pure half of `ddpctl bench`).

The measurements here are inputs written for the test (the end-to-end test in tests/distributed runs real
programs); every expected figure below is worked out by hand from them.
"""

import copy
import json

import jsonschema
import pytest

from ddpctl.bench.compare import compare, load_report, upgrade
from ddpctl.bench.plan import BenchOptions, plan
from ddpctl.bench.report import build_report, render_markdown, schema
from ddpctl.bench.runner import BenchRun, CellRun, RunResult

# (img/s, step time s, data time s) per cell key; per-GPU batch 256.
MEASURED = {
    "cifar10-resnet18/device/single/1": (40_000.0, 0.0064, 0.0),
    "cifar10-resnet18/device/dp/2": (50_000.0, 0.01024, 0.0),
    "cifar10-resnet18/device/ddp/2": (78_000.0, 0.0065641, 0.0),
    "cifar10-resnet18/dataloader/single/1": (9_900.0, 0.025859, 0.02),
    "cifar10-resnet18/dataloader/dp/2": (11_000.0, 0.046545, 0.04),
    "cifar10-resnet18/dataloader/ddp/2": (11_780.0, 0.043464, 0.035),
    "cifar10-resnet18/classic/single/1": (8_000.0, 0.032, 0.02),
    "cifar10-resnet18/classic/ddp/2": (12_000.0, 0.042667, 0.03),
    "imagenet-synthetic-resnet50/device/single/1": (3_000.0, 0.085333, 0.0),
    "imagenet-synthetic-resnet50/device/dp/2": (4_000.0, 0.128, 0.0),
    "imagenet-synthetic-resnet50/device/ddp/2": (5_400.0, 0.094815, 0.0),
}
PROBE = {"event": "allreduce_probe", "world_size": 2, "backend": "nccl", "dtype": "float32", "correct": True,
         "results": [{"bytes": 1 << 20, "iters": 20, "time_us": 20.0, "algbw_gbps": 52.4, "busbw_gbps": 52.4},
                     {"bytes": 1 << 30, "iters": 20, "time_us": 3263.7, "algbw_gbps": 329.0, "busbw_gbps": 329.0}],
         "peak_busbw_gbps": 329.0, "max_bytes": 1 << 30, "busbw_at_max_gbps": 329.0}


def make_report(measured=MEASURED, fail=()):
    p = plan(BenchOptions(), 2)
    bench = BenchRun(sysinfo={"gpu_count": 2, "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3",
                                                         "memory_gb": 85.0}], "torch": "2.11.0", "cuda": "13.0",
                              "nccl": "2.27.7", "cpu_count": 32}, plan=p, probes={2: PROBE}, seconds=100.0)
    for cell in p.cells:
        ips, step, data = measured[cell.key]
        if cell.key in fail:
            bench.runs.append(CellRun(cell, 0, RunResult(1, "", "boom", 3.0), None, "exit 1: boom"))
            continue
        summary = {"event": "summary", "images_per_sec": ips, "step_mode": "eager" if cell.pipeline == "classic" else "graph",
                   "startup_s": 3.0 if cell.pipeline == "classic" else 4.5, "step_time_s": step, "data_time_s": data,
                   "epoch_time_s": 50_000 / ips, "gpu_util": 97.0, "gpu_mem_gb": 5.5, "sync_check": "pass",
                   "global_batch": 256 * (1 if cell.strategy == "single" else 2)}
        bench.runs.append(CellRun(cell, 0, RunResult(0, "", "", 10.0), summary))
    return build_report(bench, hardware_host={"present": True, "driver": "580.159.04",
                                                       "topology": "\x1b[4mGPU0\tGPU1\x1b[0m\nGPU0 X NV18"},
                        options={"workloads": ["cifar10-resnet18"], "strategies": ["single", "dp", "ddp"],
                                 "gpus": [1, 2], "pipelines": ["device", "dataloader", "classic"], "warmup": 20, "steps": 50,
                                 "repeat": 1},
                        command="ddpctl bench", created="2026-11-26T00:00:00+00:00", runtime="host")


def cells(report):
    return {c["key"]: c for c in report["cells"]}


def test_efficiency_figures():
    c = cells(make_report())
    ddp = c["cifar10-resnet18/device/ddp/2"]
    assert ddp["baseline_key"] == "cifar10-resnet18/device/single/1"
    assert ddp["speedup"] == pytest.approx(78_000 / 40_000)
    assert ddp["scaling_efficiency"] == pytest.approx(0.975)
    ic = ddp["interconnect"]
    assert ic["grad_bytes"] == 11_173_962 * 4
    assert ic["t_comm_lb_s"] == pytest.approx(44_695_848 / 329e9)
    assert ic["t_compute_s"] == pytest.approx(0.0064)
    assert ic["eff_no_overlap"] == pytest.approx(0.979214, rel=1e-5)
    assert ddp["diagnosis"]["label"] == "compute-bound"
    # The DataLoader DDP cell is 78,000 / 11,780 = 6.6x slower than the device pipeline one: input-bound.
    # Measured against the FASTEST 1-GPU configuration of the workload (the device pipeline), never a slower one.
    dl = c["cifar10-resnet18/dataloader/ddp/2"]
    assert dl["baseline_key"] == "cifar10-resnet18/device/single/1"
    assert dl["scaling_efficiency"] == pytest.approx(11_780 / (2 * 40_000))
    assert dl["diagnosis"]["label"] == "input-pipeline-bound" and "6.6x" in dl["diagnosis"]["reason"]
    # ResNet-50: 0.9 efficiency, +9.48 ms over 1 GPU, all-reduce >= 0.311 ms -> not the interconnect.
    r50 = c["imagenet-synthetic-resnet50/device/ddp/2"]
    assert r50["scaling_efficiency"] == pytest.approx(0.9)
    assert r50["interconnect"]["t_comm_lb_s"] == pytest.approx(25_557_032 * 4 / 329e9)
    assert r50["diagnosis"]["label"] == "overhead-bound"
    # Only DDP cells on 2+ GPUs get an interconnect bound and a diagnosis.
    assert c["cifar10-resnet18/device/dp/2"]["diagnosis"] is None
    assert c["cifar10-resnet18/device/single/1"]["scaling_efficiency"] == 1.0
    # The classic (reference pipeline) cells scale against their own 1-GPU run; every other cell states how many times
    # the classic cell at the same GPU count it runs.
    cl = c["cifar10-resnet18/classic/ddp/2"]
    assert cl["baseline_key"] == "cifar10-resnet18/classic/single/1" and cl["scaling_efficiency"] == pytest.approx(0.75)
    assert cl["model"] == "torchvision-resnet18" and cl["vs_classic"] is None
    assert c["cifar10-resnet18/device/single/1"]["vs_classic"] == pytest.approx(5.0)
    assert c["cifar10-resnet18/device/ddp/2"]["classic_key"] == "cifar10-resnet18/classic/ddp/2"
    assert c["cifar10-resnet18/device/ddp/2"]["vs_classic"] == pytest.approx(6.5)
    assert c["imagenet-synthetic-resnet50/device/ddp/2"]["vs_classic"] is None  # no classic variant


def test_headline():
    h = make_report()["headline"]
    assert [(x["workload"], round(x["scaling_efficiency"], 4)) for x in h["ddp_scaling"]] == [
        ("cifar10-resnet18", 0.975), ("imagenet-synthetic-resnet50", 0.9)]
    assert h["pipeline_speedup_1gpu"][0]["ratio"] == pytest.approx(40_000 / 9_900)
    assert [(x["gpus"], x["key"], x["ratio"]) for x in h["vs_classic"]] == [
        (1, "cifar10-resnet18/device/single/1", 5.0), (2, "cifar10-resnet18/device/ddp/2", 6.5)]
    assert h["busbw_at_max_gbps"] == [{"world_size": 2, "link": "local", "bytes": 1 << 30, "busbw_gbps": 329.0}]


def test_report_matches_schema():
    rep = make_report(fail={"imagenet-synthetic-resnet50/device/dp/2"})
    rep["plots"] = []
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    bad = copy.deepcopy(rep)
    bad["cells"][0]["strategy"] = "fsdp"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema(), cls=jsonschema.Draft202012Validator)


def test_markdown_tables():
    rep = make_report(fail={"imagenet-synthetic-resnet50/device/dp/2"})
    md = render_markdown(rep, ["throughput_vs_gpus.png"])
    assert ("| cifar10-resnet18 | device | ddp | 2 | 256/512 | 78,000 | 6.6 | 0.6 | 1.95 | 97.5% | 6.5 | 97 | 5.5 | pass "
            "| graph | 4.5 |") in md
    assert "| cifar10-resnet18 | classic | single | 1 | 256/256 | 8,000 | 32.0 | 6.2 | 1.00 | 100.0% | - |" in md
    assert "ddp-train vs the classic pipeline, cifar10-resnet18, 2 GPUs: **6.5x** (78,000 img/s" in md
    assert "| imagenet-synthetic-resnet50 | device | dp | 2 | 256/512 | FAILED |" in md
    assert "| cifar10-resnet18 | device | 2 | 97.5% | - | 97.9% | 100.0% | 44.7 | 329.0 | 6.40 | 0.136 | **compute-bound**" in md
    assert "**input-pipeline-bound**" in md and "**overhead-bound**" in md
    # what ddp-train predicted at start-up (its summary's predicted_efficiency) beside the measurement
    cell = next(c for c in rep["cells"] if c["key"] == "cifar10-resnet18/device/ddp/2")
    cell["summary"] = {**(cell["summary"] or {}), "predicted_efficiency": 0.961}
    assert "| cifar10-resnet18 | device | 2 | 97.5% | 96.1% | 97.9% |" in render_markdown(rep, [])
    assert "| 1 GiB | 3263.7 | 329.00 | 329.00 |" in md
    assert "DDP scaling efficiency, cifar10-resnet18 on 2 GPUs: **97.5%**" in md
    assert "device pipeline (data on the GPU) vs DataLoader, cifar10-resnet18, 1 GPU: **4.04x**" in md
    assert "2 x NVIDIA H100 80GB HBM3" in md and "GPU0 X NV18" in md
    assert "```\nGPU0\tGPU1\nGPU0 X NV18\n```" in md  # nvidia-smi's terminal underline is removed
    assert "imagenet-synthetic-resnet50/device/dp/2 repeat 0: exit 1: boom" in md
    assert "![Throughput vs GPUs" in md


def test_compare_side_by_side_with_ratios():
    a = make_report()
    faster = {k: (v[0] * (1.25 if "resnet50" in k else 1.0), v[1], v[2]) for k, v in MEASURED.items()}
    b = make_report(faster)
    text = compare(a, b, name_a="old.json", name_b="new.json")
    assert "A = old.json: 2 x NVIDIA H100 80GB HBM3" in text
    assert "| imagenet-synthetic-resnet50/device/ddp/2 | 5,400 | 6,750 | 1.25x |" in text
    assert "| cifar10-resnet18/device/ddp/2 | 78,000 | 78,000 | 1.00x | 97.5% | 97.5% |" in text
    assert "| x2 at max size | 329.00 | 329.00 | 1.00x |" in text


def test_committed_reports_are_current():
    """Every report under docs/benchmarks/*/ is valid against the schema and its report.md is what the
    renderer makes of its report.json (so the committed tables cannot drift from the data)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
    reports = sorted(root.rglob("report.json"))
    assert reports, "no committed bench report"
    for path in reports:
        # the files stay as ddpctl wrote them (older ones name the device pipeline "gpu"); report.md is what
        # the renderer makes of the report as read
        jsonschema.validate(json.loads(path.read_text()), schema(), cls=jsonschema.Draft202012Validator)
        rep = load_report(path)
        assert (path.parent / "report.md").read_text() == render_markdown(rep, rep["plots"])
        for png in rep["plots"]:
            assert (path.parent / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _old_spelling(report: dict) -> dict:
    """``report`` with the device pipeline spelled "gpu" (its deprecated name, as earlier versions wrote it)."""
    text = json.dumps(report).replace('/device/', '/gpu/').replace('"pipeline": "device"', '"pipeline": "gpu"')
    old = json.loads(text)
    old["options"]["pipelines"] = ["gpu" if p == "device" else p for p in old["options"]["pipelines"]]
    old["headline"]["pipeline_speedup_1gpu"] = [{("gpu_pipeline" if k == "device" else k): v for k, v in h.items()}
                                                for h in old["headline"]["pipeline_speedup_1gpu"]]
    return old


def test_reports_name_the_device_pipeline_as_ddp_train_does():
    rep = make_report()
    assert {c["pipeline"] for c in rep["cells"]} == {"device", "dataloader", "classic"}
    assert "/gpu/" not in json.dumps([c["key"] for c in rep["cells"]] + rep["headline"]["vs_classic"])
    assert rep["headline"]["pipeline_speedup_1gpu"][0]["device"] == 40_000.0
    assert upgrade(rep) == rep  # a current report reads as it is


def test_an_older_report_with_the_gpu_spelling_reads_as_device(tmp_path):
    """Reports written before the rename (committed ones, users' baselines) stay valid and read the same."""
    rep = make_report()
    old = _old_spelling(rep)
    assert old["cells"][0]["pipeline"] == "gpu" and "cifar10-resnet18/gpu/ddp/2" in {c["key"] for c in old["cells"]}
    jsonschema.validate({**old, "plots": []}, schema(), cls=jsonschema.Draft202012Validator)  # "gpu": deprecated
    assert upgrade(old) == rep
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(rep))
    text = compare(load_report(tmp_path / "old.json"), load_report(tmp_path / "new.json"))
    assert "| cifar10-resnet18/device/ddp/2 | 78,000 | 78,000 | 1.00x |" in text and "/gpu/" not in text
    assert "cells only in" not in text  # every cell matched across the spellings
    assert render_markdown(load_report(tmp_path / "old.json")) == render_markdown(rep)


def _probe(busbw):
    return {**PROBE, "results": [{**PROBE["results"][1], "busbw_gbps": busbw}], "peak_busbw_gbps": busbw,
            "busbw_at_max_gbps": busbw}


def test_socket_cells_use_the_socket_link_and_say_what_would_gain():
    """The two-node emulation's cell is measured against the fastest 1-GPU run and bounded by the socket
    probe: ResNet-50's 102.2 MB of fp32 gradients at 4.5 GB/s busbw over 2 ranks take >= 22.7 ms against
    85.3 ms of compute: no-overlap bound 79.0%, measured 80.0%: communication-bound."""
    p = plan(BenchOptions(workloads=("imagenet-synthetic-resnet50",), strategies=("single", "ddp"),
                          links=("local", "socket")), 2)
    bench = BenchRun(sysinfo={"gpu_count": 2, "gpus": [], "torch": "2.11.0"}, plan=p, probes={2: PROBE}, seconds=1.0,
                     socket_probes={(2, "socket"): _probe(4.5), (2, "socket-nccl-defaults"): _probe(2.1)})
    measured = {"imagenet-synthetic-resnet50/device/single/1": (3_000.0, 0.085333),
                "imagenet-synthetic-resnet50/device/ddp/2": (5_400.0, 0.094815),
                "imagenet-synthetic-resnet50/device/ddp/2/socket": (4_800.0, 0.106667)}
    for cell in p.cells:
        ips, step = measured[cell.key]
        bench.runs.append(CellRun(cell, 0, RunResult(0, "", "", 1.0), {
            "event": "summary", "images_per_sec": ips, "step_time_s": step, "step_mode": "graph",
            "graph_reducer": "flat", "grad_compression": "none", "global_batch": 256 * cell.gpus}))
    rep = build_report(bench, hardware_host={}, options={"workloads": ["imagenet-synthetic-resnet50"],
                       "strategies": ["single", "ddp"], "gpus": [1, 2], "pipelines": ["device"], "warmup": None,
                       "steps": None, "repeat": 1}, command="ddpctl bench", created="2026-11-27T00:00:00",
                       runtime="host")
    rep["plots"] = []
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    sock = cells(rep)["imagenet-synthetic-resnet50/device/ddp/2/socket"]
    assert sock["link"] == "socket" and sock["baseline_key"] == "imagenet-synthetic-resnet50/device/single/1"
    assert sock["scaling_efficiency"] == pytest.approx(0.8)
    assert sock["interconnect"]["busbw_gbps"] == 4.5
    assert sock["interconnect"]["t_comm_lb_s"] == pytest.approx(25_557_032 * 4 / 4.5e9)
    assert sock["interconnect"]["eff_no_overlap"] == pytest.approx(0.78975, rel=1e-4)
    assert sock["diagnosis"]["label"] == "communication-bound"
    assert cells(rep)["imagenet-synthetic-resnet50/device/ddp/2"]["interconnect"]["busbw_gbps"] == 329.0
    (adv,) = rep["link_advice"]
    assert adv["key"] == sock["key"] and adv["link"] == "socket"
    assert adv["gains"][0].startswith("bf16 gradients") and "22.7 -> 11.4 ms" in adv["gains"][0]
    assert "79.0% -> 88.3%" in adv["gains"][0]
    assert "bucketed reducer" in adv["gains"][1]
    assert "busbw 2.1 -> 4.5 GB/s" in adv["gains"][2] and "InfiniBand" in adv["gains"][3]
    md = render_markdown(rep, [])
    assert "| imagenet-synthetic-resnet50 | device | ddp (2 nodes, sockets) | 2 | 256/512 | 4,800 |" in md
    assert "2 GPUs, 2 nodes over sockets (NCCL's socket defaults), nccl, float32:" in md
    assert "- `imagenet-synthetic-resnet50/device/ddp/2/socket` (communication-bound, 80.0%):" in md
    # a compressed run moves half the bytes
    sock["summary"]["grad_compression"] = "bf16"
    from ddpctl.bench.links import grad_bytes
    assert grad_bytes(100, sock["summary"]) == 200


def test_plots_of_a_matrix_without_lines_draw_no_empty_legend(tmp_path):
    """One 1-GPU cell per workload (``--strategies single --gpus 1``, the CPU default of a small matrix) gives
    axes with no labelled line: the plots are still written, with no empty legend and no matplotlib warning."""
    import warnings

    pytest.importorskip("matplotlib")
    from ddpctl.bench.plots import make_plots

    rep = make_report()
    rep["cells"] = [c for c in rep["cells"] if c["strategy"] == "single"]
    rep["plan"]["gpu_counts"] = [1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        written = make_plots(rep, tmp_path)
    assert written and all((tmp_path / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_each_run_keeps_the_link_it_measured_at_start_up_and_the_cell_their_median():
    """ddp-train's summary says the link busbw it chose its plan from (link_busbw_gbps; older runs only in the
    first words of comm_reason): each run keeps it, the cell the median; a run that measured none, a reason in
    another form or one that is not text gives none."""
    from ddpctl.bench.links import startup_link_gbps as _link_gbps

    assert _link_gbps({"link_busbw_gbps": 6.4, "comm_reason": "link 9.9 GB/s busbw < 25: slow"}) == 6.4
    assert _link_gbps({"comm_reason": "link 8.8 GB/s busbw < 25: slow (auto: compression bf16)"}) == 8.8
    for summary in (None, {}, {"comm_reason": "one rank: nothing to all-reduce"}, {"comm_reason": 7},
                    {"comm_reason": "link 1e400 GB/s busbw "}, {"link_busbw_gbps": True}, {"link_busbw_gbps": 0},
                    {"link_busbw_gbps": float("nan")}, {"link_busbw_gbps": float("inf")}, {"link_busbw_gbps": 1e-9},
                    {"comm_reason": "x" * 10_000 + "link 5 GB/s busbw "}):
        assert _link_gbps(summary) is None, summary
    p = plan(BenchOptions(workloads=("cifar10-resnet18",), strategies=("ddp",), gpus=(2,), links=("socket",),
                          repeat=3), 2)
    cell = next(c for c in p.cells if c.link == "socket")
    bench = BenchRun(sysinfo={"gpu_count": 2, "gpus": [], "torch": "2.11.0"}, plan=p, seconds=1.0)
    for other in p.cells:
        for rep_i, link in enumerate((9.8, 4.8, 8.8) if other is cell else (None,)):
            bench.runs.append(CellRun(other, rep_i, RunResult(0, "", "", 1.0), {
                "event": "summary", "images_per_sec": 70_000.0 + rep_i, "step_time_s": 0.007, "step_mode": "graph",
                "global_batch": 256 * other.gpus,
                **({"comm_reason": f"link {link} GB/s busbw < 25: slow (auto: compression bf16)"} if link else {})}))
    rep = build_report(bench, hardware_host={}, options={"workloads": ["cifar10-resnet18"], "strategies": ["ddp"],
                       "gpus": [2], "pipelines": ["device"], "warmup": None, "steps": None, "repeat": 3},
                       command="ddpctl bench", created="2026-11-27T00:00:00", runtime="host")
    rep["plots"] = []
    jsonschema.validate(rep, schema(), cls=jsonschema.Draft202012Validator)
    c = cells(rep)[cell.key]
    assert [r["link_busbw_gbps"] for r in c["runs"]] == [9.8, 4.8, 8.8] and c["link_busbw_gbps"] == 8.8


def test_what_a_run_printed_reaches_report_md_escaped():
    """A run's error carries the last lines it printed (hostile): RunResult.tail escapes what is not printable on
    one line and keeps the last 400 characters, and report.md escapes errors and the command line again."""
    tail = RunResult(1, "", "fine\n" + "x" * 1000 + " \x1b[31mboom\x07", 1.0).tail(2)
    assert "\x1b" not in tail and tail.endswith("\\x1b[31mboom\\x07") and len(tail) <= 400
    assert RunResult(1, "", "a\nb\nc\nd", 1.0).tail(2) == "c | d"
    rep = make_report(fail=("cifar10-resnet18/device/ddp/2",))
    (bad,) = [r for c in rep["cells"] for r in c["runs"] if r["error"]]
    bad["error"] = "exit 1: \x1b]0;title\x07\x1b[2J"
    rep["command"] = "ddpctl bench \x1b[31m"
    md = render_markdown(rep, [])
    assert "\x1b" not in md and "\x07" not in md
    assert "exit 1: \\x1b]0;title\\x07\\x1b[2J" in md and "`ddpctl bench \\x1b[31m`" in md
