"""--grad-compression on real gloo process groups (CPU): a compressed run's loss curve stays within the noise
of the uncompressed one over the same steps, and the first log line says what was chosen and why."""

from __future__ import annotations

import json

import pytest

from ddp_helpers import TOY, ok, summary, torchrun

pytestmark = pytest.mark.distributed

ARGS = TOY + ["--epochs", "4", "--log-interval", "2", "--progress", "lines", "--no-eval"]


def _curve(tmp_path, name, *extra):
    metrics = tmp_path / f"{name}.jsonl"
    p = ok(torchrun(2, ARGS + ["--metrics-file", str(metrics), *extra])[0])
    steps = [json.loads(x) for x in metrics.read_text().splitlines() if '"event": "step"' in x]
    return p, [s["loss"] for s in steps]


def _window_means(curve, k=4):
    return [sum(curve[i:i + k]) / len(curve[i:i + k]) for i in range(0, len(curve), k)]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    return _curve(tmp, "none", "--grad-compression", "none")[1], _curve(tmp, "seed1", "--grad-compression", "none",
                                                                           "--seed", "1")[1]


@pytest.mark.parametrize("compression", ["bf16", "powersgd"])
def test_compressed_loss_curve_within_noise_of_uncompressed(tmp_path, compression, references):
    """Noise = how far two uncompressed runs that differ only in the data order (--seed) drift apart; the
    compressed run with the reference's seed must stay at least as close to it, window by window, and end as
    low (the same steps, the same data)."""
    ref, other = references
    p, comp = _curve(tmp_path, compression, "--grad-compression", compression)
    assert len(ref) == len(comp) == len(other) >= 12
    first = p.stdout.splitlines()[0]
    assert f"comm: grad_compression={compression} graph_reducer=flat bucket_mb=25: CPU ranks (gloo)" in first, first
    r, o, c = _window_means(ref), _window_means(other), _window_means(comp)
    noise = max(abs(a - b) for a, b in zip(r, o, strict=True))
    gap = max(abs(a - b) for a, b in zip(r, c, strict=True))
    assert noise > 0
    assert gap <= max(noise, 0.02), (compression, gap, noise, r, c)
    assert c[-1] < 0.6 * c[0], c  # it learns
    assert summary(p)["sync_check"] == "pass"


def test_auto_on_cpu_is_none_and_says_why():
    p = ok(torchrun(2, TOY + ["--epochs", "1", "--progress", "lines"])[0])
    first = p.stdout.splitlines()[0]
    assert "comm: grad_compression=none graph_reducer=flat bucket_mb=25: CPU ranks (gloo)" in first, first
    assert "(auto: compression none, flat reducer, 25 MB buckets)" in first, first
    assert summary(p)["grad_compression"] == "none"

