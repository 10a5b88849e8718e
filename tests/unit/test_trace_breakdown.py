"""benchmarks/trace_breakdown.py on hand-written traces in torch.profiler's Chrome-trace format: a stand-in for
the GPU traces of `ddp-train --profile-dir`, which only a CUDA machine records (the CPU trace it writes here
has no GPU activity, which the script reports; tests/distributed/test_bucketed_allreduce_cpu.py runs that)."""

from __future__ import annotations

import gzip
import json

import pytest
from benchmarks import trace_breakdown as tb


def _k(name, ts, dur, corr, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr}}


def _launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
            "args": {"correlation": corr}}


def _steps(overlapped: bool):
    """Three replays of 1,000 us: compute 0-800, then either one NCCL kernel 800-1000 after the backward, or a
    bucket 500-650 on another stream (under compute) plus one 800-900; 100 us between replays."""
    ev = []
    for i in range(3):
        t, c = 10_000 + i * 1_100, 100 + i
        ev.append(_launch(t - 50, c))
        ev.append(_k("conv_fwd", t, 400, c))
        ev.append(_k("conv_bwd", t + 400, 400, c))
        if overlapped:
            ev.append(_k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 500, 150, c, stream=20))
            ev.append(_k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 800, 100, c, stream=20))
            ev.append(_k("sgd_fused", t + 900, 100, c))
        else:
            ev.append(_k("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 800, 200, c, stream=20))
    ev.append(_k("unrelated_eager_copy", 50, 10, 999))  # not part of any replay
    return ev


def test_flat_step_all_nccl_exposed():
    r = tb.breakdown(_steps(overlapped=False))
    m = r["median_ms"]
    assert r["mode"] == "graph" and r["steps"] == 3 and r["nccl_kernels_per_step"] == 1
    assert m["span"] == pytest.approx(1.0) and m["compute"] == pytest.approx(0.8)
    assert m["nccl"] == pytest.approx(0.2) and m["nccl_exposed"] == pytest.approx(0.2) and m["nccl_hidden"] == 0
    assert m["gap"] == pytest.approx(0.1) and m["idle"] == pytest.approx(0.0)
    assert r["step_period_ms"] == pytest.approx(1.1)


def test_bucketed_step_hidden_and_exposed_parts(tmp_path, capsys):
    r = tb.breakdown(_steps(overlapped=True))
    m = r["median_ms"]
    # 150 us under conv_bwd, 100 us alone before the optimizer
    assert m["nccl"] == pytest.approx(0.25) and m["nccl_hidden"] == pytest.approx(0.15)
    assert m["nccl_exposed"] == pytest.approx(0.1) and r["nccl_kernels_per_step"] == 2
    assert [round(s, 3) for s, _, _ in r["median_step_nccl_kernels"]] == [0.5, 0.8]
    d = tmp_path / "prof"
    d.mkdir()
    for rank, ov in ((0, True), (1, False)):
        with gzip.open(d / f"trace-rank{rank}.json.gz", "wt") as f:
            json.dump({"traceEvents": _steps(ov)}, f)
    assert tb.main([str(d), "--json", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "| prof/rank0 | graph | 3 | 1.000 |" in out and "| prof/rank1 | graph | 3 |" in out
    assert json.loads((tmp_path / "b.json").read_text())["prof/rank1"]["median_ms"]["nccl_exposed"] == 0.2


def test_eager_trace_is_one_window_and_cpu_trace_says_so(tmp_path, capsys):
    ev = [_k("a", 0, 100, 1), _k("nccl_allreduce", 50, 100, 2), _k("b", 200, 100, 3)]
    r = tb.breakdown(ev)
    assert r["mode"] == "window" and r["median_ms"]["nccl_exposed"] == pytest.approx(0.05)
    assert r["median_ms"]["idle"] == pytest.approx(0.05)
    assert "error" in tb.breakdown([{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 0, "dur": 1}])
    assert tb.main([str(tmp_path)]) == 2  # no traces there
