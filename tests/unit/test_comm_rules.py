"""The pure rules of how gradients cross the link: ddp_train.comm.compression.choose (auto compression, reducer,
bucket size from the measured busbw) and ddp_train.comm.socket_transport (NCCL socket settings where no InfiniBand is found)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ddp_train.comm import socket_transport  # noqa: E402
from ddp_train.comm.compression import SLOW_LINK_GBPS, choose  # noqa: E402

AUTO = dict(compression="auto", graph_reducer="auto", bucket_mb=None)


def test_fast_link_keeps_fp32_flat_and_ddp_buckets():
    p = choose(**AUTO, busbw_gbps=300.0, world=4)
    assert (p.compression, p.graph_reducer, p.bucket_mb) == ("none", "flat", 25.0)
    assert "fast" in p.reason and "300.0 GB/s" in p.reason


@pytest.mark.parametrize("busbw,expect_mb", [(2.1, 10.7), (4.5, 22.9), (0.5, 4.0), (20.0, 25.0)])
def test_slow_link_compresses_overlaps_and_sizes_buckets(busbw, expect_mb):
    p = choose(**AUTO, busbw_gbps=busbw, world=4)
    assert (p.compression, p.graph_reducer) == ("bf16", "bucketed")
    assert p.bucket_mb == pytest.approx(expect_mb, abs=0.1)
    assert "slow" in p.reason and "compression bf16" in p.reason


def test_threshold_and_explicit_flags_win():
    assert choose(**AUTO, busbw_gbps=SLOW_LINK_GBPS, world=2).compression == "none"
    p = choose(compression="none", graph_reducer="flat", bucket_mb=50.0, busbw_gbps=1.0, world=2)
    assert (p.compression, p.graph_reducer, p.bucket_mb) == ("none", "flat", 50.0)
    assert "all set by flags" in p.reason
    p = choose(compression="powersgd", graph_reducer="auto", bucket_mb=None, busbw_gbps=1.0, world=2)
    assert p.compression == "powersgd" and p.graph_reducer == "bucketed"


def test_unmeasured_link_is_the_fast_default():
    p = choose(**AUTO, busbw_gbps=None, world=2, why_unmeasured="CPU ranks (gloo): link not measured")
    assert (p.compression, p.graph_reducer, p.bucket_mb) == ("none", "flat", 25.0)
    assert p.reason.startswith("CPU ranks (gloo)")


def test_socket_rule_sets_threads_only_without_usable_infiniband(tmp_path):
    ib = tmp_path / "ib"
    env = {socket_transport.MODE_ENV: "auto"}
    why = socket_transport.apply(env, str(ib))  # no /sys/class/infiniband at all
    assert env["NCCL_SOCKET_NTHREADS"] == "4" and env["NCCL_NSOCKS_PERTHREAD"] == "4", why
    (ib / "mlx5_0").mkdir(parents=True)
    env = {socket_transport.MODE_ENV: "auto"}
    assert "InfiniBand found (mlx5_0)" in socket_transport.apply(env, str(ib)) and "NCCL_SOCKET_NTHREADS" not in env
    env = {socket_transport.MODE_ENV: "auto", "NCCL_IB_DISABLE": "1"}  # IB there but switched off: sockets it is
    socket_transport.apply(env, str(ib))
    assert env["NCCL_NSOCKS_PERTHREAD"] == "4"


def test_socket_rule_keeps_user_values_and_off():
    env = {socket_transport.MODE_ENV: "auto", "NCCL_SOCKET_NTHREADS": "2"}
    why = socket_transport.apply(env, "/nonexistent")
    assert env["NCCL_SOCKET_NTHREADS"] == "2" and env["NCCL_NSOCKS_PERTHREAD"] == "4"
    assert "kept the environment's NCCL_SOCKET_NTHREADS=2" in why
    for mode in ({}, {socket_transport.MODE_ENV: "off"}):
        env = dict(mode)
        socket_transport.apply(env, "/nonexistent")
        assert "NCCL_SOCKET_NTHREADS" not in env


def test_prediction_known_answers():
    """25M parameters over a 10 GB/s link at 2 ranks: fp32 100 MB -> 10 ms on the wire, bf16 5 ms; with 40 ms of
    compute the bucketed reducer hides half of it (f = 0.5), the flat one none; bf16's casts (4 bytes a gradient
    at 2 TB/s: 50 us) are exposed."""
    from ddp_train.comm.compression import CAST_BYTES_PER_PARAM, CAST_BYTES_PER_S, OVERLAP_FRACTION, predict

    assert (OVERLAP_FRACTION, CAST_BYTES_PER_PARAM, CAST_BYTES_PER_S) == (0.5, 4, 2.0e12)
    shape = dict(compute_s=0.040, grad_params=25_000_000, busbw_gbps=10.0, world=2)
    flat = predict(**shape, compression="none", graph_reducer="flat")
    assert (flat.comm_s, flat.exposed_s) == pytest.approx((0.010, 0.010))
    assert flat.efficiency == pytest.approx(0.8)
    bucketed = predict(**shape, compression="bf16", graph_reducer="bucketed")
    assert (bucketed.comm_s, bucketed.exposed_s, bucketed.cast_s) == pytest.approx((0.005, 0.0025, 0.00005))
    assert bucketed.efficiency == pytest.approx(0.040 / (0.040 + 0.0025 + 0.00005))
    assert "2.5 ms of it exposed, casts 0.05 ms)" in bucketed.describe()
    assert flat.cast_s == 0 and "casts" not in flat.describe()
    # the backward hides no more than the step computes: 1 ms of compute, 10 ms of fp32 all-reduce
    short = predict(compute_s=0.001, grad_params=25_000_000, busbw_gbps=10.0, world=2, compression="none",
                    graph_reducer="bucketed")
    assert short.exposed_s == pytest.approx(0.009)
    assert "predicted 80% of one GPU's pace (compute 40.0 ms, all-reduce 10.0 ms, 10.0 ms of it exposed)" \
        == flat.describe()


def test_slow_link_keeps_fp32_when_the_step_hides_it_and_says_its_prediction():
    # ResNet-50-like (25.6M parameters, 64 ms of compute) over 10 GB/s: bf16 gains ~3.5 points -> bf16
    p = choose(**AUTO, busbw_gbps=10.0, world=2, compute_s=0.064, grad_params=25_557_032)
    assert (p.compression, p.graph_reducer) == ("bf16", "bucketed")
    assert p.predicted is not None and p.predicted.efficiency == pytest.approx(0.064 / (0.064 + 0.00511 / 2), rel=1e-3)
    assert "predicted 96% of one GPU's pace" in p.describe()
    # a 1 s step over 20 GB/s: fp32's 5 ms all-reduce costs under a point -> fp32 kept, and why
    p = choose(**AUTO, busbw_gbps=20.0, world=2, compute_s=1.0, grad_params=25_000_000)
    assert (p.compression, p.graph_reducer) == ("none", "bucketed")
    assert "compression none (bf16 would gain 0.1 points" in p.reason
    # an explicit choice is never second-guessed; without the compute time there is no prediction
    assert choose(compression="bf16", graph_reducer="auto", bucket_mb=None, busbw_gbps=20.0, world=2,
                  compute_s=1.0, grad_params=25_000_000).compression == "bf16"
    assert choose(**AUTO, busbw_gbps=20.0, world=2).predicted is None
    # a fast link: fp32 flat as before, with its prediction
    fast = choose(**AUTO, busbw_gbps=300.0, world=4, compute_s=0.0052, grad_params=11_173_962)
    assert (fast.compression, fast.graph_reducer) == ("none", "flat") and fast.predicted.efficiency > 0.95


def test_an_eager_run_is_predicted_with_ddps_overlapping_buckets():
    """On a fast link the plan says flat (graph mode's reducer), but an eager run's DDP overlaps its buckets with
    the backward whatever that says: the prediction hides half the all-reduce there, none in graph mode."""
    shape = dict(**AUTO, busbw_gbps=100.0, world=2, compute_s=0.010, grad_params=25_000_000)
    graph, eager = choose(**shape), choose(**shape, graph_mode=False)
    assert graph.graph_reducer == eager.graph_reducer == "flat"
    assert graph.predicted.exposed_s == pytest.approx(0.001) and eager.predicted.exposed_s == pytest.approx(0.0005)


def test_fast_link_short_bf16_step_all_reduces_in_bf16_and_says_why():
    """ResNet-18 (11,173,962 gradients) on 4 GPUs at 289 GB/s with a 4.7 ms graph step computed in bf16: fp32
    flat exposes 0.232 ms (95.3%), bf16 0.116 ms + 0.022 ms of casts (97.1%): +1.8 points -> bf16, flat. The
    same run in fp32 arithmetic, an eager step or a 64 ms step: fp32 kept."""
    shape = dict(busbw_gbps=289.0, world=4, compute_s=0.0047, grad_params=11_173_962)
    p = choose(**AUTO, **shape, bf16_compute=True)
    assert (p.compression, p.graph_reducer, p.bucket_mb) == ("bf16", "flat", 25.0)
    assert "compression bf16 (gains 1.8 points over fp32" in p.reason
    assert p.predicted.efficiency == pytest.approx(0.0047 / (0.0047 + 1.5 * 11_173_962 * 2 / 289e9 + 11_173_962 * 4 / 2e12))
    assert choose(**AUTO, **shape).compression == "none"  # fp32 arithmetic (bf16_compute False)
    assert choose(**AUTO, **shape, bf16_compute=True, graph_mode=False).compression == "none"
    assert choose(**AUTO, **{**shape, "compute_s": 0.064}, bf16_compute=True).compression == "none"
    # flags decide where given: bucketed asked keeps fp32 on a fast link, none asked is none for the short step,
    # bf16 asked is bf16 for the long one
    assert choose(compression="auto", graph_reducer="bucketed", bucket_mb=None, **shape,
                  bf16_compute=True).compression == "none"
    assert choose(compression="none", graph_reducer="auto", bucket_mb=None, **shape,
                  bf16_compute=True).compression == "none"
    assert choose(compression="bf16", graph_reducer="auto", bucket_mb=None, **{**shape, "compute_s": 0.064},
                  bf16_compute=True).compression == "bf16"


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "fast", "1e400"])
def test_a_given_link_must_be_a_positive_number(monkeypatch, value):
    """DDP_TRAIN_LINK_GBPS skips the start-up measurement: a value that is not a positive finite number is a
    one-line usage error (before any CUDA work: a CUDA device is only named here)."""
    from ddp_train.comm import compression
    from ddp_train.errors import EXIT_USAGE, TrainError

    monkeypatch.setenv(compression.LINK_ENV, value)
    with pytest.raises(TrainError) as exc:
        compression.decide(compression="auto", graph_reducer="auto", bucket_mb=None, device=torch.device("cuda", 0),
                           world=2, distributed=True)
    assert exc.value.code == EXIT_USAGE and "is not a positive number" in str(exc.value)
