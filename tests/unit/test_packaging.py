"""The project builds without setuptools deprecation warnings (licence as an SPDX string, no legacy keys)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_build_has_no_deprecation_warnings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, env=env, timeout=300)
    shutil.rmtree(ROOT / "build" / "lib", ignore_errors=True)  # what setuptools leaves behind
    for d in (ROOT / "build").glob("bdist.*"):
        shutil.rmtree(d, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(tmp_path.glob("ddpctl-*.whl"))
    text = proc.stdout + proc.stderr
    bad = [line.strip() for line in text.splitlines()
           if "deprecat" in line.lower() or "SetuptoolsWarning" in line or "license classifier" in line.lower()]
    assert not bad, "\n".join(bad[:20])
