"""Pure parts of ddpctl.images: the CUDA/driver table, base and build plans, the input hash."""

from pathlib import Path

import pytest

from ddpctl.errors import UsageError
from ddpctl.images import (
    DEFAULT_CUDA_BASE,
    DEFAULT_LOCAL_BASE,
    BasePlan,
    build_hash,
    build_plan,
    driver_supports,
    min_driver_for_cuda,
)


@pytest.mark.parametrize("cuda, driver, ok", [
    ("12.6", "525.60.13", True),     # exactly the minimum
    ("12.6", "525.60.12", False),    # one patch below
    ("12.8", "535.104.05", True),
    ("12.0", "470.82.01", False),
    ("13.0", "580.65.06", True),
    ("13.0", "575.57.08", False),    # a 12.x-era driver cannot run a 13.x image
    ("13.2", "590.44.01", True),
    ("13.0", "1000.1", True),        # numeric, not string, comparison
    ("12.6", "99.1", False),
])
def test_driver_table(cuda, driver, ok):
    verdict = driver_supports(cuda, driver)
    assert verdict.ok is ok
    assert cuda in verdict.reason and driver in verdict.reason


@pytest.mark.parametrize("cuda, driver, needle", [
    (None, "580.65.06", "CPU build"),
    ("", None, "CPU build"),
    ("12.6", None, "no NVIDIA driver"),
    ("9.2", "580.65.06", "no known minimum"),
    ("12.6", "garbage", "cannot read"),
])
def test_driver_cannot_tell(cuda, driver, needle):
    verdict = driver_supports(cuda, driver)
    assert verdict.ok is None and needle in verdict.reason


def test_min_driver():
    assert min_driver_for_cuda("12.6") == "525.60.13"
    assert min_driver_for_cuda("13.0") == "580.65.06"
    assert min_driver_for_cuda("x") is None


def test_default_bases_and_tags():
    cpu = build_plan(cpu=True)
    assert (cpu.base, cpu.tag, cpu.cuda_version) == (DEFAULT_LOCAL_BASE, "ddpctl/ddp-train:cpu", "")
    gpu = build_plan(cpu=False)
    assert gpu.base == DEFAULT_CUDA_BASE == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert gpu.tag == "ddpctl/ddp-train:cuda" and gpu.buildargs()["CUDA_VERSION"] == "13.0"


def test_build_plan_rejects_bad_options(tmp_path):
    with pytest.raises(UsageError, match="--ca-file only applies"):
        build_plan(cpu=True, ca_file=tmp_path / "ca.pem")
    with pytest.raises(UsageError, match="not an http"):
        build_plan(cpu=True, index_url="mirror.local/simple")
    with pytest.raises(UsageError, match="is not a directory"):
        build_plan(cpu=True, wheelhouse=tmp_path / "nope")
    with pytest.raises(UsageError, match="CA file"):
        build_plan(cpu=True, index_url="https://m/simple", ca_file=tmp_path / "none.pem")


def test_base_plan():
    plan = BasePlan()
    argv = plan.debootstrap_argv("/tmp/root")
    assert argv[:2] == ["debootstrap", "--variant=minbase"]
    assert "python3" in argv[2] and argv[-3:] == ["bookworm", "/tmp/root", "http://deb.debian.org/debian"]
    assert BasePlan(packages=("python3",)).input_hash != plan.input_hash
    assert any(c.startswith("LABEL ddpctl.base-hash=" + plan.input_hash) for c in plan.import_changes())


def test_build_hash_follows_every_input(tmp_path: Path):
    a = tmp_path / "Dockerfile"
    a.write_text("FROM x\n")
    whl = tmp_path / "ddpctl-0.1.0-py3-none-any.whl"
    whl.write_bytes(b"one")
    plan = build_plan(cpu=True)
    h0 = build_hash(plan, "sha256:base", [a, whl])
    assert build_hash(plan, "sha256:base", [whl, a]) == h0  # order does not matter
    assert build_hash(plan, "sha256:other", [a, whl]) != h0
    assert build_hash(build_plan(cpu=True, torch_version="2.12.0"), "sha256:base", [a, whl]) != h0
    whl.write_bytes(b"two")
    assert build_hash(plan, "sha256:base", [a, whl]) != h0
