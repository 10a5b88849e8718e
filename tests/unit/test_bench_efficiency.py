"""The scaling arithmetic of `ddpctl bench`, against cases worked out by hand."""

import pytest

from ddpctl.bench import efficiency as eff


@pytest.mark.parametrize("n, factor", [(1, 0.0), (2, 1.0), (3, 4 / 3), (4, 1.5), (8, 1.75)])
def test_bus_factor(n, factor):
    assert eff.bus_factor(n) == pytest.approx(factor)


def test_bus_factor_rejects_zero():
    with pytest.raises(ValueError):
        eff.bus_factor(0)


def test_busbw_nccl_tests_definition():
    # 1 GiB in 3.2637 ms on 2 GPUs: algbw = 1073741824 / 0.0032637 = 329.0e9 B/s; x 2(2-1)/2 = 1 -> same.
    assert eff.algbw(1 << 30, 0.0032637) == pytest.approx(328.996e9, rel=1e-4)
    assert eff.busbw(1 << 30, 0.0032637, 2) == pytest.approx(328.996e9, rel=1e-4)
    # 8 GPUs, 1 GB in 4.01 ms: algbw 249.4 GB/s, busbw x1.75 = 436.4 GB/s.
    assert eff.busbw(1e9, 4.01e-3, 8) == pytest.approx(436.41e9, rel=1e-4)


def test_speedup_and_scaling_efficiency():
    assert eff.speedup(19_000, 10_000) == pytest.approx(1.9)
    assert eff.scaling_efficiency(19_000, 10_000, 2) == pytest.approx(0.95)
    assert eff.scaling_efficiency(11_780, 9_907, 2) == pytest.approx(0.594529, rel=1e-5)  # the reference pipeline, 2 GPUs
    assert eff.scaling_efficiency(22_100, 2_790, 8) == pytest.approx(0.990143, rel=1e-5)  # Lambda's ResNet-50
    with pytest.raises(ValueError):
        eff.scaling_efficiency(1.0, 0.0, 2)


def test_allreduce_lower_bound_resnet18_cifar_two_gpus():
    # 11,173,962 fp32 params = 44,695,848 B; 2 GPUs: factor 1; at 329 GB/s -> 0.135854 ms.
    t = eff.allreduce_time_lower_bound(11_173_962 * 4, 2, 329e9)
    assert t == pytest.approx(44_695_848 / 329e9)
    assert t * 1e3 == pytest.approx(0.135854, rel=1e-5)


def test_allreduce_lower_bound_resnet50_eight_gpus_bf16():
    # perf.md's worked example: 25.56M params x 2 B = 51.12 MB, x1.75 = 89.46 MB on the wire, 360 GB/s -> 0.2485 ms.
    assert eff.allreduce_time_lower_bound(25.56e6 * 2, 8, 360e9) * 1e3 == pytest.approx(0.2485, rel=1e-3)


def test_one_gpu_needs_no_communication():
    assert eff.allreduce_time_lower_bound(1e9, 1, 1.0) == 0.0


def test_bounds_when_compute_dominates():
    # t_compute = 256 img / 40,000 img/s = 6.4 ms; t_comm = 0.135854 ms.
    b = eff.interconnect_bound(11_173_962 * 4, 2, 329e9, 6.4e-3)
    assert b.t_comm * 1e3 == pytest.approx(0.135854, rel=1e-5)
    assert b.eff_no_overlap == pytest.approx(6.4 / (6.4 + 0.135854), rel=1e-6)  # 0.979214
    assert b.eff_no_overlap == pytest.approx(0.979214, rel=1e-5)
    assert b.eff_full_overlap == 1.0


def test_bounds_when_communication_dominates():
    assert eff.efficiency_no_overlap(1e-3, 2e-3) == pytest.approx(1 / 3)
    assert eff.efficiency_full_overlap(1e-3, 2e-3) == pytest.approx(0.5)
    assert eff.efficiency_full_overlap(2e-3, 1e-3) == 1.0


def test_diagnose_input_pipeline_by_faster_sibling():
    d = eff.diagnose(n=2, efficiency=0.99, step_time=0.05, baseline_step_time=0.05, t_comm=1e-4,
                     faster_pipeline_ratio=4.2)
    assert d.label == eff.INPUT and "4.2x" in d.reason


def test_diagnose_input_pipeline_by_data_wait():
    d = eff.diagnose(n=2, efficiency=0.6, step_time=0.05, baseline_step_time=0.03, t_comm=1e-4, data_fraction=0.4)
    assert d.label == eff.INPUT and "40%" in d.reason


def test_diagnose_compute_bound_when_scaling_well():
    d = eff.diagnose(n=2, efficiency=0.97, step_time=6.6e-3, baseline_step_time=6.4e-3, t_comm=1.36e-4)
    assert d.label == eff.COMPUTE


def test_diagnose_communication_bound_when_the_extra_time_is_the_allreduce():
    # 1-GPU step 1.0 ms, 2-GPU step 1.25 ms (eff 0.8); all-reduce >= 0.2 ms; 0.25 <= 1.5 x 0.2.
    d = eff.diagnose(n=2, efficiency=0.8, step_time=1.25e-3, baseline_step_time=1.0e-3, t_comm=0.2e-3)
    assert d.label == eff.COMMUNICATION
    assert "+0.25 ms" in d.reason and "0.20 ms" in d.reason


def test_diagnose_overhead_when_the_allreduce_cannot_explain_it():
    d = eff.diagnose(n=2, efficiency=0.6, step_time=10e-3, baseline_step_time=6e-3, t_comm=0.1e-3)
    assert d.label == eff.OVERHEAD and "+4.00 ms" in d.reason


def test_median_and_spread():
    assert eff.median([3.0, 1.0, 2.0]) == 2.0
    assert eff.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert eff.spread([90.0, 100.0, 110.0]) == pytest.approx(0.2)
    assert eff.spread([5.0]) == 0.0
    with pytest.raises(ValueError):
        eff.median([])
