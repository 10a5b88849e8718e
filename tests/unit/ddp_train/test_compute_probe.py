"""The start-up timing of the step's compute (ddp_train.model.compute_probe), on real torch (CPU here; the GPU
tests see it in a CUDA run's first line): a positive time, the model's parameter count, and nothing of the run
touched (the random number generators continue as if it had not run)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ddp_train.model import compute_probe  # noqa: E402
from ddp_train.model.networks import build_model  # noqa: E402


def test_times_forward_and_backward_counts_parameters_and_leaves_the_generators_as_they_were():
    torch.manual_seed(123)
    expected_next = torch.rand(4)
    torch.manual_seed(123)
    seconds, params = compute_probe.measure(model="toy-cnn", shape=(1, 28, 28), num_classes=10, batch=8,
                                            device=torch.device("cpu"), amp_dtype=None, channels_last=True)
    assert torch.equal(torch.rand(4), expected_next)  # the run's own random stream, untouched
    assert 0 < seconds < 30
    assert params == sum(t.numel() for t in build_model("toy-cnn", (1, 28, 28), 10).parameters())


def test_a_larger_batch_takes_longer():
    kw = dict(model="toy-cnn", shape=(1, 28, 28), num_classes=10, device=torch.device("cpu"), amp_dtype=None,
              channels_last=False)
    small = min(compute_probe.measure(batch=2, **kw)[0] for _ in range(3))
    large = min(compute_probe.measure(batch=256, **kw)[0] for _ in range(3))
    assert large > small
