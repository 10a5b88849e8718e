"""Wheelhouses made with pip on this host, for image builds whose container cannot reach a package index (a proxy
with its own TLS CA, a mirror known only to the host's pip configuration) while the host can.

- :func:`probe` runs the image once: its Python version, machine and glibc (the wheels it can install), the
  distributions it already has (name, version, requirements), and whether pip inside it reaches an index.
- :func:`download_missing` resolves a requirements file on the host *as if installed into that image*: pip runs
  with ``--dry-run`` in an environment that holds only the image's distributions (their metadata, no code), for the
  image's Python and platform, so torch and the ``nvidia-*`` libraries the image has count as installed and are
  never fetched; then it downloads exactly what the image lacks.
- :func:`download` is a plain ``pip download`` for a target (the CUDA torch wheels of the local CUDA base).

The host's pip configuration (index, extra indexes, CA bundle, proxy) is used as it is: it is the user's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl.errors import EngineError, UsageError

PROBE_SCRIPT = r"""
import importlib.metadata as md, json, platform, subprocess, sys
out = {"python": "%d.%d" % sys.version_info[:2], "machine": platform.machine(), "libc": list(platform.libc_ver())}
seen = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if not name or name.lower() in seen:
        continue  # the first on sys.path wins, as for pip
    seen[name.lower()] = {"name": name, "version": d.version, "requires": list(d.requires or []),
                          "requires_python": d.metadata.get("Requires-Python"),
                          "extras": list(d.metadata.get_all("Provides-Extra") or [])}
out["installed"] = sorted(seen.values(), key=lambda d: d["name"].lower())
if "--index" in sys.argv:
    try:
        p = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pip", "--retries", "0",
                            "--timeout", "5", "--disable-pip-version-check"], capture_output=True, timeout=30)
        out["index_ok"] = p.returncode == 0
    except Exception:
        out["index_ok"] = False
print("PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Target:
    """What an image's pip can install: CPython X.Y on a machine, glibc (major, minor) or None."""

    python: str
    machine: str
    glibc: tuple[int, int] | None

    def platforms(self) -> list[str]:
        """The manylinux platform tags of this glibc and every older one (pip takes only the tags given)."""
        if self.glibc is None or self.glibc[0] != 2:
            raise UsageError(f"the image's C library is not glibc 2.x ({self.glibc}); no manylinux wheel fits it",
                             "pass --wheelhouse DIR with wheels built for the image")
        tags = [f"manylinux_2_{m}_{self.machine}" for m in range(self.glibc[1], 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        tags += [f"{name}_{self.machine}" for minor, name in legacy.items() if self.glibc[1] >= minor]
        return tags

    def pip_args(self) -> list[str]:
        nodot = self.python.replace(".", "")
        args = ["--only-binary=:all:", "--python-version", self.python, "--implementation", "cp",
                "--abi", f"cp{nodot}"]
        for tag in self.platforms():
            args += ["--platform", tag]
        return args

    def describe(self) -> str:
        glibc = f"glibc {self.glibc[0]}.{self.glibc[1]}" if self.glibc else "no glibc"
        return f"Python {self.python}, {self.machine}, {glibc}"


@dataclass
class ImageFacts:
    target: Target
    installed: list[dict] = field(default_factory=list)
    index_ok: bool | None = None

    def has(self, name: str) -> str | None:
        key = _norm(name)
        return next((d["version"] for d in self.installed if _norm(d["name"]) == key), None)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def probe(client, image: str, *, index: bool = False) -> ImageFacts:
    """Run ``image`` once (no GPU request) and read its Python, platform, installed distributions and, with
    ``index``, whether pip inside it reaches a package index."""
    from ddpctl.dockerengine.tools import run_once

    argv = ["python3", "-c", PROBE_SCRIPT] + (["--index"] if index else [])
    try:
        code, out = run_once(client, image, argv, network_mode="bridge" if index else "none")
    except EngineError:
        if not index:
            raise
        return probe(client, image)  # no default bridge on this engine: no index either
    line = next((x for x in out.splitlines() if x.startswith("PROBE ")), None)
    if code != 0 or line is None:
        tail = (out.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"cannot read the Python environment of {image} (exit {code}: {tail[:200]})",
                          "the image needs python3 on PATH")
    doc = json.loads(line[len("PROBE "):])
    libc = doc.get("libc") or ["", ""]
    glibc = None
    if libc[0] == "glibc":
        m = re.match(r"(\d+)\.(\d+)", libc[1])
        glibc = (int(m.group(1)), int(m.group(2))) if m else None
    return ImageFacts(Target(doc["python"], doc["machine"], glibc), doc.get("installed", []), doc.get("index_ok"))


def _pip_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)


def _fail(what: str, proc: subprocess.CompletedProcess, fix: str) -> None:
    text = proc.stderr or proc.stdout or ""
    errors = [x.strip() for x in text.splitlines() if x.strip().startswith("ERROR:")]
    missing = re.search(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                        r"requirement)\s+(\S+)", text)
    if missing:
        raise UsageError(f"{what}: pip on this host finds no wheel of {missing.group(1)} for the image", fix)
    detail = (errors or [x for x in text.strip().splitlines() if x.strip()] or ["no output"])[-1]
    raise EngineError(f"{what}: {detail[:300]}", fix)


@dataclass
class Wheelhouse:
    path: Path
    wheels: list[str]
    bytes: int
    seconds: float

    def summary(self) -> str:
        return f"{len(self.wheels)} wheels, {self.bytes / 1e6:.1f} MB in {self.seconds:.0f} s"


def _collect(dest: Path, t0: float) -> Wheelhouse:
    files = sorted(p for p in dest.iterdir() if p.is_file() and p.suffix == ".whl")
    return Wheelhouse(dest, [p.name for p in files], sum(p.stat().st_size for p in files), time.monotonic() - t0)


def download(requirements: list[str], dest: Path, target: Target, *, index_args: list[str] | None = None,
             skip_find_links: bool = False, timeout: float = 1800) -> Wheelhouse:
    """``pip download`` of ``requirements`` and their dependencies for ``target`` into ``dest``.

    ``skip_find_links``: ignore the host configuration's find-links directories (they may hold a local build,
    e.g. a ``+cpu`` torch, that would win over the index's release of the same version)."""
    t0 = time.monotonic()
    dest.mkdir(parents=True, exist_ok=True)
    env = _pip_env()
    empty = None
    if skip_find_links:
        empty = tempfile.mkdtemp(prefix="ddpctl-nolinks-")
        env["PIP_FIND_LINKS"] = empty
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(dest), *target.pip_args(),
                               *(index_args or []), *requirements], capture_output=True, text=True, env=env,
                              timeout=timeout)
    finally:
        if empty:
            shutil.rmtree(empty, ignore_errors=True)
    if proc.returncode != 0:
        _fail(f"downloading {' '.join(requirements)} on this host failed", proc,
              "check pip's index settings on this host (pip config list), or pass --wheelhouse DIR")
    return _collect(dest, t0)


def _fake_site(site: Path, installed: list[dict]) -> None:
    """Metadata-only copies of the image's distributions: what pip on the host sees as already installed."""
    import pip

    site.mkdir(parents=True)
    for d in installed:
        info = site / f"{_norm(d['name']).replace('-', '_')}-{d['version']}.dist-info"
        info.mkdir(exist_ok=True)
        lines = ["Metadata-Version: 2.1", f"Name: {d['name']}", f"Version: {d['version']}"]
        if d.get("requires_python"):
            lines.append(f"Requires-Python: {d['requires_python']}")
        lines += [f"Provides-Extra: {e}" for e in d.get("extras") or []]  # else pip drops a `pkg[extra]`'s deps
        lines += [f"Requires-Dist: {r}" for r in d.get("requires") or []]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
        (info / "INSTALLER").write_text("ddpctl-probe\n")
    (site / "pip").symlink_to(Path(pip.__file__).resolve().parent)


def download_missing(requirements: Path, facts: ImageFacts, dest: Path, *, index_args: list[str] | None = None,
                     timeout: float = 1800) -> Wheelhouse:
    """The wheels the image lacks for ``requirements``: resolved against the image's installed distributions,
    for its Python and platform, then downloaded (nothing the image has, torch included, is fetched).
    ``index_args``: pip's source options (``--index-url URL``, ``--no-index --find-links DIR``), else the
    host's pip configuration."""
    index_args = index_args or []
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ddpctl-resolve-"))
    try:
        site = work / "site"
        _fake_site(site, facts.installed)
        report = work / "report.json"
        # -S: no site-packages of this host's Python; the fake site (and pip itself) is all pip sees installed
        proc = subprocess.run([sys.executable, "-S", "-m", "pip", "install", "--dry-run", "-q", "--report",
                               str(report), *facts.target.pip_args(), *index_args, "-r", str(requirements)],
                              capture_output=True, text=True, cwd=work, timeout=timeout,
                              env=_pip_env(PYTHONPATH=str(site), PYTHONNOUSERSITE="1"))
        if proc.returncode != 0:
            _fail(f"resolving {requirements.name} for the image on this host failed", proc,
                  "fix the requirements file, check pip's index settings on this host, or pass --wheelhouse DIR")
        items = json.loads(report.read_text()).get("install", [])
        pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items]
        dest.mkdir(parents=True, exist_ok=True)
        if pins:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest),
                                   *facts.target.pip_args(), *index_args, *pins], capture_output=True, text=True,
                                  env=_pip_env(), timeout=timeout)
            if proc.returncode != 0:
                _fail(f"downloading the wheels of {requirements.name} on this host failed", proc,
                      "check pip's index settings on this host (pip config list), or pass --wheelhouse DIR")
        return _collect(dest, t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
