"""A workspace's requirements.txt when pip in the build container reaches no package index but the host does
(here: the host's pip trusts a TLS-intercepting proxy's CA, the containers do not), with no pip flag at all:

- ddpctl resolves the requirements on the host against what the base image already has (torch, numpy, ...
  count as installed), for the image's Python and platform, downloads only what is missing and says how many
  wheels and bytes: no torch and no ``nvidia-*`` wheel is fetched for an image that has torch;
- the requirements layer is keyed by base + requirements text, so the next command on the unchanged tree
  (``up --bake`` again, ``image build --workdir`` with or without a wheelhouse) reuses it and says so.

Real: the Docker Engine, pip on this host against its configured index, the packages (torchmetrics, lightning
with its dependencies), torchrun, gloo and a Lightning DDP run on 2 nodes.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from itest_helpers import ddpctl, own_requirements

LIGHTNING_TRAIN = '''\
import os

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
trainer = L.Trainer(accelerator="cpu", devices=1, num_nodes=int(os.environ["WORLD_SIZE"]), strategy="ddp",
                    max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Model(), data)
print(f"lightning {L.__version__} rank {trainer.global_rank}/{trainer.world_size} steps {trainer.global_step}",
      flush=True)
# end the process group before the interpreter exits, as torch asks: without it, gloo's threads can abort the
# process at exit ("terminate called without an active exception", exit 134; seen once under load), which up
# rightly reports as a failed node
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
'''


@pytest.fixture(scope="module")
def container_has_no_index(engine, cpu_image):
    from ddpctl.images import host_wheels

    if host_wheels.probe(engine, cpu_image, index=True).index_ok:
        pytest.skip("pip in the containers reaches a package index here: the host wheelhouse is not used")


def _project(root: Path, requirements: str, train: str) -> Path:
    proj = root / f"hostwheels-{uuid.uuid4().hex[:6]}"
    proj.mkdir(parents=True)
    (proj / "train.py").write_text(train)
    # this test's own requirements layer (the layer is keyed by the file's text)
    (proj / "requirements.txt").write_text(own_requirements(requirements))
    return proj


def _made_wheels(stderr: str) -> list[str]:
    line = next((x for x in stderr.splitlines() if x.startswith("wheelhouse made on this host: ")), None)
    assert line is not None, stderr[-3000:]
    m = re.match(r"wheelhouse made on this host: (\d+) wheels, ([\d.]+) MB in \d+ s: (.*?)(?: \(kept from|$)", line)
    assert m, line
    wheels = [w.strip() for w in m.group(3).split(",")]
    assert int(m.group(1)) == len(wheels) > 0 and float(m.group(2)) > 0, line
    return wheels


def _no_torch(wheels: list[str]) -> None:
    assert not [w for w in wheels if re.match(r"(torch|triton|nvidia[-_]|cuda[-_])", w, re.I)
                and not w.lower().startswith("torchmetrics")], wheels


def _remove_images(engine, proj: Path) -> None:
    for img in engine.images.list(name=f"ddpctl-workspace/{proj.name}"):
        deps = img.labels.get("ai.ddpctl.workspace.deps-hash")
        engine.images.remove(img.id, force=True)
        if deps:
            try:
                engine.images.remove(f"ddpctl/workspace-deps:{deps}")
            except Exception:  # noqa: BLE001 - already gone
                pass


def test_hostwheels_up_bake_with_no_flag_then_reuses_the_layer(engine, cpu_image, container_has_no_index,
                                                               tmp_path, job_name):
    proj = _project(tmp_path, "torchmetrics",
                    "import torchmetrics\nprint('metrics', torchmetrics.__version__, flush=True)\n")
    argv = ["up", "--name", job_name, "-n", "1", "--rm", "--image", cpu_image, "--workdir", str(proj), "--bake",
            "--", "python", "train.py"]
    try:
        first = ddpctl(*argv, timeout=900)
        assert first.returncode == 0, first.stderr[-3000:]
        assert "metrics " in first.stdout, first.stdout[-2000:]
        assert "reaches no package index: resolving requirements.txt with pip on this host" in first.stderr
        wheels = _made_wheels(first.stderr)
        _no_torch(wheels)
        assert any(w.startswith("torchmetrics-") for w in wheels)
        assert "(kept from ddpctl/ddp-train" in first.stderr and "torch 2.13.0" in first.stderr
        second = ddpctl(*argv, timeout=900)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "metrics " in second.stdout
        assert "is cached (same base and requirements.txt): not rebuilt" in second.stderr
        assert "is up to date" in second.stderr
        assert "wheelhouse made on this host" not in second.stderr and "installing requirements.txt" not in second.stderr
        # where the wheels come from is not part of the key: a --wheelhouse run finds the same layer
        empty = tmp_path / "empty-wheelhouse"
        empty.mkdir()
        third = ddpctl("image", "build", "--base", cpu_image, "--workdir", str(proj), "--wheelhouse", str(empty), timeout=600)
        assert third.returncode == 0, third.stderr[-3000:]
        assert "is cached" in third.stderr and "is up to date" in third.stderr
    finally:
        _remove_images(engine, proj)


def test_hostwheels_lightning_project_runs_ddp_on_two_nodes(engine, cpu_image, container_has_no_index, tmp_path,
                                                            job_name):
    """The user's story: a Lightning script and `requirements.txt: lightning` through `up --bake` alone."""
    proj = _project(tmp_path, "lightning", LIGHTNING_TRAIN)
    try:
        first = ddpctl("up", "--name", job_name, "-n", "2", "--rm", "--image", cpu_image, "--workdir", str(proj),
                       "--bake", "--", "python", "train.py", timeout=1200)
        assert first.returncode == 0, first.stderr[-3000:]
        wheels = _made_wheels(first.stderr)
        _no_torch(wheels)
        names = {re.split(r"-\d", w, maxsplit=1)[0].lower() for w in wheels}
        assert {"lightning", "torchmetrics", "lightning_utilities"} <= names, wheels
        for rank in (0, 1):
            assert re.search(rf"rank-{rank} \| lightning \S+ rank {rank}/2 steps 3", first.stdout), first.stdout[-3000:]
        again = ddpctl("image", "build", "--base", cpu_image, "--workdir", str(proj), timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "is cached (same base and requirements.txt): not rebuilt" in again.stderr
        assert "is up to date" in again.stderr and "wheelhouse made" not in again.stderr
    finally:
        _remove_images(engine, proj)


def test_hostwheels_refuse_a_source_reference_pip_would_build_on_the_host(engine, cpu_image, container_has_no_index,
                                                                          tmp_path):
    """pip builds a direct reference to source to read its dependencies (whatever --only-binary says), so the
    host resolution refuses it in one line: no build code of the workspace's requirements runs on this host."""
    proj = _project(tmp_path, "git+https://git.invalid/evil/evil.git", "print('never')\n")
    try:
        res = ddpctl("image", "build", "--base", cpu_image, "--workdir", str(proj), timeout=300)
        assert res.returncode == 2, res.stderr[-3000:]
        last = res.stderr.strip().splitlines()[-2:]
        assert any("is not a wheel" in x and "line 1" in x for x in last), res.stderr[-2000:]
        assert "Traceback" not in res.stderr and "wheelhouse made" not in res.stderr
        assert not engine.images.list(name=f"ddpctl-workspace/{proj.name}")
    finally:
        _remove_images(engine, proj)
