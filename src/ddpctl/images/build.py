"""``ddpctl image build``: ``docker/Dockerfile`` built through the Docker SDK (legacy builder: no BuildKit
features), with the project wheel made on the host and torch taken from a wheelhouse or an index when the base
has none. An image whose recorded input hash matches is reused ("up to date"), so CI rebuilds only when
something that goes into the image changed."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import __version__, dockerengine
from ddpctl.dockerengine.tools import image_id as _image_id
from ddpctl.dockerengine.tools import image_labels, run_once
from ddpctl.errors import EngineError, UsageError
from ddpctl.images.build_output import BuildProgress
from ddpctl.images.plans import (
    DEFAULT_LOCAL_BASE,
    LABEL_BUILD_HASH,
    LABEL_CUDA,
    LABEL_TORCH,
    STAGE_DIR,
    BuildPlan,
    build_hash,
)
from ddpctl.images.pull import pull_base
from ddpctl.images.tidy import BuildTrace, deps_tag, drop_if_untagged, tidy_build
from ddpctl.launch import LABEL_MANAGED_BY, LABEL_VERSION, MANAGED_BY


def find_source_root(start: Path | None = None) -> Path:
    """The ddpctl source checkout (it holds docker/Dockerfile and pyproject.toml)."""
    candidates = [start] if start else [Path.cwd(), Path(__file__).resolve().parents[3]]
    for c in candidates:
        for d in [c, *c.parents]:
            if (d / "docker" / "Dockerfile").is_file() and (d / "pyproject.toml").is_file():
                return d
    raise UsageError("no ddpctl source checkout found (docker/Dockerfile and pyproject.toml)",
                     "run 'ddpctl image build' from the ddpctl repository, or pass --context DIR")


def build_wheel(root: Path, dest: Path) -> Path:
    """The project wheel, built reproducibly (fixed timestamps) so the image layer cache holds."""
    for old in dest.glob("ddpctl-*.whl"):
        old.unlink()
    env = dict(os.environ, SOURCE_DATE_EPOCH="315532800", PIP_DISABLE_PIP_VERSION_CHECK="1")
    import importlib.util

    # Without isolation when setuptools is here (no index needed); otherwise pip fetches the build backend.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
                           "-w", str(dest), str(root)], capture_output=True, text=True, env=env)
    wheels = list(dest.glob("ddpctl-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"building the ddpctl wheel failed ({last})",
                          "check that setuptools is installed in this environment")
    # setuptools leaves a build/lib copy behind; it is not part of anything
    shutil.rmtree(root / "build" / "lib", ignore_errors=True)
    shutil.rmtree(root / "build" / "bdist.linux-x86_64", ignore_errors=True)
    return wheels[0]


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's unconditional Requires-Dist entries (no extras)."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    reqs = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = line.split(":", 1)[1].strip()
            if "extra ==" not in req:
                reqs.append(req)
    return reqs


# what every image carries beyond torch and ddpctl's own dependencies (the wheelhouse of the CPU image is made from
# the same list: ``make wheelhouse``)
IMAGE_EXTRAS = ("tensorboard",)


def image_requirements(plan: BuildPlan, wheel: Path) -> list[str]:
    """What stage 1 installs: torch (skipped there when the base has it), ddpctl's dependencies and, on every image,
    tensorboard (``ddp-train --tensorboard``, ``up --tensorboard``, torch.utils.tensorboard in a user's script; the
    CPU image's wheelhouse has it: ``make wheelhouse``)."""
    # numpy: torch's optional array interop; without it every process warns at import
    return [f"torch=={plan.torch_version}", "numpy", *wheel_requirements(wheel), *IMAGE_EXTRAS]


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def stage_context(plan: BuildPlan, root: Path) -> list[Path]:
    """Fill build/image/ (wheel, wheelhouse, CA file); returns the staged files."""
    stage = root / STAGE_DIR
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "dist").mkdir(parents=True)
    (stage / "wheelhouse").mkdir()
    (stage / "ca").mkdir()
    wheel = build_wheel(root, stage / "dist")
    files = [wheel]
    (stage / "requirements.txt").write_text("".join(f"{r}\n" for r in image_requirements(plan, wheel)))
    files.append(stage / "requirements.txt")
    if plan.wheelhouse is not None and not plan.local_base:  # local: the torch base took the wheelhouse's torch
        for whl in sorted(plan.wheelhouse.iterdir()):
            if whl.is_file() and whl.suffix in (".whl", ".gz", ".zip") and not whl.name.startswith("ddpctl-"):
                _link_or_copy(whl, stage / "wheelhouse" / whl.name)
                files.append(stage / "wheelhouse" / whl.name)
    if plan.ca_file is not None:
        shutil.copy2(plan.ca_file, stage / "ca" / "ca.pem")
        files.append(stage / "ca" / "ca.pem")
    files.append(root / plan.dockerfile)
    return files


@dataclass
class BuildResult:
    tag: str
    image_id: str
    cached: bool
    seconds: float
    labels: dict[str, str] = field(default_factory=dict)


def build_image(plan: BuildPlan, *, root: Path | None = None, progress: BuildProgress | None = None,
                force: bool = False, nocache: bool = False) -> BuildResult:
    """Build ``plan`` with the Docker SDK; skipped when an image with the same input hash exists."""
    t0 = time.monotonic()
    progress = progress or BuildProgress()
    root = root or find_source_root()
    client = dockerengine.connect()
    if plan.local_base:
        from ddpctl.images.torch_base import build_torch_base

        build_torch_base(plan.torch_version, plan.cuda_version, progress=progress, wheelhouse=plan.wheelhouse,
                         index_url=plan.index_url, ca_file=plan.ca_file)
    base_id = _image_id(client, plan.base)
    if base_id is None and plan.base == DEFAULT_LOCAL_BASE:
        raise EngineError(f"base image {plan.base} is not present on this Docker Engine",
                          "build it offline with 'ddpctl image base'")
    if base_id is None:
        base_id = pull_base(client, plan.base, progress)
    found = probe_torch(client, plan.base)
    if found is not None:  # the labels must describe the torch the image really has
        progress.line(f"base {plan.base} has torch {found[0]} (CUDA {found[1] or 'none'})")
        plan = dataclasses.replace(plan, torch_version=found[0].split("+")[0], cuda_version=found[1] or "")
    elif plan.cpu and plan.wheelhouse is None and plan.index_url is None:
        raise UsageError(f"base image {plan.base} has no torch and no --wheelhouse or --index-url was given",
                         "pass --wheelhouse DIR (pip download -d DIR torch==2.13.0 ...) or --index-url URL")
    files = stage_context(plan, root)
    digest = build_hash(plan, base_id, files)
    existing = image_labels(client, plan.tag)
    if existing is not None and existing.get(LABEL_BUILD_HASH) == digest and not force and not nocache:
        shutil.rmtree(root / STAGE_DIR, ignore_errors=True)
        progress.done(f"{plan.tag} is up to date (inputs {digest})")
        return BuildResult(plan.tag, _image_id(client, plan.tag) or "", True, time.monotonic() - t0, existing)
    try:
        _host_wheelhouse(client, plan, root, progress)
    except BaseException:
        shutil.rmtree(root / STAGE_DIR, ignore_errors=True)
        raise
    previous_id = _image_id(client, plan.tag)
    labels = {LABEL_BUILD_HASH: digest, LABEL_VERSION: __version__, LABEL_MANAGED_BY: MANAGED_BY}
    image_id = ""
    error = None
    trace = BuildTrace()
    try:
        for ev in client.api.build(path=str(root), dockerfile=plan.dockerfile, tag=plan.tag, rm=True,
                                   forcerm=True, pull=False, nocache=nocache, buildargs=plan.buildargs(),
                                   labels=labels, decode=True):
            if "stream" in ev:
                for line in ev["stream"].splitlines():
                    trace.feed(line)
                    progress.line(line)
            elif "status" in ev:
                progress.line(str(ev["status"]))
            if "error" in ev:
                error = ev.get("error", "").strip()
            if "aux" in ev and isinstance(ev["aux"], dict) and "ID" in ev["aux"]:
                image_id = ev["aux"]["ID"]
    except Exception as exc:  # connection dropped, API error
        error = str(exc).splitlines()[0]
    finally:
        shutil.rmtree(root / STAGE_DIR, ignore_errors=True)
    if error:
        tidy_build(client, trace, None, None)
        raise EngineError(f"building {plan.tag} failed: {error[:300]}", "read the build output above")
    image_id = image_id or _image_id(client, plan.tag) or ""
    if previous_id and previous_id != image_id:
        drop_if_untagged(client, previous_id)
    tidy_build(client, trace, image_id, deps_tag(plan.tag))
    seconds = time.monotonic() - t0
    final = image_labels(client, plan.tag) or {}
    progress.done(f"built {plan.tag} ({image_id[7:19]}) in {seconds:.0f}s: torch {final.get(LABEL_TORCH, '?')}, "
                  f"CUDA {final.get(LABEL_CUDA) or 'none'}")
    return BuildResult(plan.tag, image_id, False, seconds, final)


def _host_wheelhouse(client, plan: BuildPlan, root: Path, progress: BuildProgress) -> None:
    """When pip in the build container has no index to install from (no --index-url, no --wheelhouse, and the
    base's pip cannot reach one), or the base is the local CUDA base (its torch came from the wheelhouse): the
    wheels the base lacks, resolved against what it has and downloaded on this host (images.host_wheels)."""
    from ddpctl.images import host_wheels

    if plan.index_url or (plan.wheelhouse is not None and not plan.local_base):
        return
    facts = host_wheels.probe(client, plan.base, index=plan.wheelhouse is None)
    if plan.wheelhouse is None and facts.index_ok:
        return
    index_args = ["--no-index", "--find-links", str(plan.wheelhouse)] if plan.wheelhouse is not None else []
    wh = host_wheels.download_missing(root / STAGE_DIR / "requirements.txt", facts, root / STAGE_DIR / "wheelhouse",
                                     index_args=index_args)
    progress.line(f"wheelhouse made on this host for {plan.base} ({facts.target.describe()}): {wh.summary()}"
                  + (f": {', '.join(wh.wheels)}" if wh.wheels else ""))


def probe_torch(client, image: str) -> tuple[str, str] | None:
    """(torch version, CUDA version or '') of the torch in ``image``, None when it has none.

    Runs the image once with no GPU request and removes the container afterwards."""
    code, out = run_once(client, image, ["python3", "-c", "import torch; print('TORCH', torch.__version__, "
                                                          "torch.version.cuda or '')"])
    for line in out.splitlines():
        if code == 0 and line.startswith("TORCH "):
            parts = line.split()
            return parts[1], parts[2] if len(parts) > 2 else ""
    return None
