"""A third-party Lightning script (Trainer(strategy="ddp"), gloo) with ddp_train's ProgressCallback, baked into a
workspace image with ``ddpctl up --bake`` (lightning installed offline from a wheelhouse made here with pip
download: the network is needed once, to fill it), shows its progress in ``ddpctl status``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from itest_helpers import ddpctl, remove_project_images

HERE = Path(__file__).resolve().parent


def _closure(names: list[str], skip: set[str]) -> dict[str, str]:
    """name -> version of ``names`` and everything they need (as installed here), less ``skip`` (in the image)."""
    out: dict[str, str] = {}
    todo = list(names)
    while todo:
        n = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if n in out or n in skip:
            continue
        try:
            dist = metadata.distribution(n)
        except metadata.PackageNotFoundError:
            continue
        out[n] = dist.version
        for req in dist.requires or []:
            if "extra ==" in req and "http" not in req:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return out


def _wheelhouse(dest: Path) -> Path:
    skip = {"torch", "numpy", "pyyaml", "typing-extensions", "filelock", "jinja2", "networkx", "sympy", "mpmath",
            "markupsafe", "setuptools", "fsspec", "idna"}
    # aiohttp: lightning needs fsspec[http]; fsspec itself is in the image
    pins = [f"{n}=={v}" for n, v in sorted(_closure(["lightning", "aiohttp"], skip).items())]
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                           "-d", str(dest), *pins], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"pip download of lightning's wheels failed (needs a package index): {proc.stderr}"
    return dest


def test_lightning_callback_progress_in_status_of_an_up_bake_job(engine, cpu_image, tmp_path, job_name):
    proj = tmp_path / "lit-project"
    proj.mkdir()
    shutil.copy(HERE.parent / "support" / "lightning_job.py", proj / "train.py")
    (proj / "requirements.txt").write_text(f"lightning=={metadata.version('lightning')}\n")
    house = _wheelhouse(tmp_path / "wheelhouse")
    up = ddpctl("up", "--name", job_name, "-n", "2", "-d", "--image", cpu_image, "--workdir", str(proj), "--bake",
                "--wheelhouse", str(house), "--", "python", "train.py", "40", timeout=900)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        deadline = time.monotonic() + 400
        seen_running = None
        while time.monotonic() < deadline:
            st = json.loads(ddpctl("status", job_name, "--json", check=True).stdout)
            if st["records_seen"] and st["state"] == "running" and seen_running is None:
                seen_running = st
            if st["state"] != "running":
                break
            time.sleep(1)
        assert st["state"] == "exited" and st["result"] == "succeeded", ddpctl("logs", job_name).stdout[-3000:]
        assert sorted(r["rank"] for r in st["ranks"]) == [0, 1]
        assert st["progress"]["step"] == st["progress"]["total"] == 80 and st["progress"]["loss"] is not None
        assert seen_running is None or seen_running["progress"]["step"] <= 80
        assert "RANK" in ddpctl("status", job_name, check=True).stdout
    finally:
        ddpctl("down", job_name)
        remove_project_images(engine, "ddpctl-workspace/lit-project", proj)
