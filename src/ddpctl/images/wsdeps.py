"""Where the requirements layer of a workspace image (``ddpctl/workspace-deps:<hash>``) gets its wheels.

The user's ``--wheelhouse`` / ``--index-url`` win. With neither, pip inside the base installs from the index it
reaches; when it reaches none (the common case behind a proxy whose TLS CA only the host trusts, or a mirror
only the host's pip configuration names) while the host does, the wheelhouse is made on this host
(:func:`ddpctl.images.hostwheels.download_missing`): resolved against what the base already has (its torch, the
``nvidia-*`` libraries and the rest count as installed and are never fetched), for the base's Python and
platform, and removed after the build. The layer's key does not depend on any of this
(:func:`ddpctl.images.workspace.deps_hash`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpctl.images import hostwheels
from ddpctl.images.workspace import PipOptions


@dataclass
class LayerSources:
    pip: PipOptions
    no_index: bool = False  # pip in the build container must not look for an index (offline wheelhouse)
    scratch: Path | None = None

    def buildargs(self) -> dict[str, str]:
        return {"INDEX_URL": self.pip.index_url or "", "NO_INDEX": "1" if self.no_index else ""}

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def layer_sources(client, base: str, requirements: Path, pip: PipOptions, progress) -> LayerSources:
    """pip's sources for building the requirements layer of ``requirements`` on ``base``."""
    if pip.wheelhouse is not None or pip.index_url:
        return LayerSources(pip)
    facts = hostwheels.probe(client, base, index=True)
    if facts.index_ok:
        progress.line(f"pip in {base} reaches a package index: {requirements.name} is installed from it")
        return LayerSources(pip)
    progress.line(f"pip in {base} reaches no package index: resolving {requirements.name} with pip on this host "
                  f"against the {len(facts.installed)} distributions {base} has ({facts.target.describe()})")
    scratch = Path(tempfile.mkdtemp(prefix="ddpctl-wheels-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    try:
        wh = hostwheels.download_missing(requirements, facts, scratch / "wheels")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    kept = [f"{name} {facts.has(name)}" for name in ("torch", "numpy") if facts.has(name)]
    progress.line(f"wheelhouse made on this host: {wh.summary()}: {', '.join(wh.wheels) or 'nothing missing'}"
                  + (f" (kept from {base}: {', '.join(kept)})" if kept else ""))
    return LayerSources(PipOptions(wheelhouse=scratch / "wheels"), no_index=True, scratch=scratch)
