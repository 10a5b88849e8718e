"""`ddpctl image check` and `image build` caching on the real engine (the CPU image from make image-cpu)."""

import json
from pathlib import Path

import pytest

from itest_helpers import ddpctl


@pytest.mark.engine_exclusive  # compares every container on the engine before and after
def test_image_check_reports_versions_and_leaves_nothing(engine, cpu_image):
    before = {c.id for c in engine.containers.list(all=True)}
    proc = ddpctl("image", "check", cpu_image, "--json")
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts["torch"].startswith("2.13.0") and facts["cuda"] is None and facts["gloo"] is True
    assert facts["torchrun"] == "/opt/ddpctl/bin/torchrun" and facts["ddp_train"] == "/opt/ddpctl/bin/ddp-train"
    assert facts["gpus"] == [] and facts["driver_ok"] is None  # no GPU here, nothing to compare
    labels = engine.images.get(cpu_image).labels
    assert labels["ai.ddpctl.torch.version"] == "2.13.0" and labels["ai.ddpctl.cuda.version"] == ""
    assert {c.id for c in engine.containers.list(all=True)} == before
    table = ddpctl("image", "check", cpu_image).stdout
    assert "torch" in table and "driver check" in table


def test_image_check_missing_image():
    proc = ddpctl("image", "check", "ddpctl/no-such:image")
    assert proc.returncode == 1 and proc.stderr.startswith("error: image ddpctl/no-such:image is not present")


def test_build_is_skipped_when_inputs_are_unchanged(engine, cpu_image):
    # make image-cpu built it from this tree; the same inputs must be recognised without a rebuild
    root = Path(__file__).resolve().parents[2]
    proc = ddpctl("image", "build", "--cpu", "--wheelhouse", str(root / "wheelhouse"), "--tag", cpu_image, cwd=root,
                  timeout=900)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "is up to date" in proc.stderr and proc.stdout.strip() == cpu_image
