"""Container images: the local Debian base, the ddp-train image build, and the image check.

Three parts, each split into a pure planning step and a thin side-effect step:

- ``base``: an air-gapped base image (Debian + Python from an apt mirror) made with ``debootstrap`` and
  imported into the engine, for sites (and this project's CI) that cannot pull from a registry;
- ``build``: ``docker/Dockerfile`` built through the Docker SDK (legacy builder: no BuildKit features),
  with the project wheel made on the host and torch taken from a wheelhouse or an index when the base
  has none. An image whose recorded input hash matches is reused ("up to date"), so CI rebuilds only
  when something that goes into the image changed;
- ``check``: run the image once, report torch / CUDA / cuDNN / NCCL and the GPUs it sees, and compare the
  host driver against the minimum the image's CUDA needs (:func:`driver_supports`).

The ``docker`` package is imported lazily, only in functions that talk to the engine.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from typing import Iterable

from ddpctl import __version__
from ddpctl.errors import EngineError, UsageError
from ddpctl.launch import LABEL_MANAGED_BY, LABEL_VERSION, MANAGED_BY
from ddpctl.spec import DEFAULT_CPU_IMAGE, DEFAULT_GPU_IMAGE

# The pinned defaults. The CUDA image starts from the official PyTorch runtime image; the CPU image from
# the local Debian base made by `ddpctl image base`.
TORCH_VERSION = "2.13.0"
CUDA_VERSION = "13.0"
DEFAULT_CUDA_BASE = f"pytorch/pytorch:{TORCH_VERSION}-cuda{CUDA_VERSION}-cudnn9-runtime"
DEFAULT_LOCAL_BASE = "ddpctl/base:bookworm"
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-pip", "ca-certificates", "procps")

LABEL_BUILD_HASH = "ddpctl.build-hash"
LABEL_BASE_HASH = "ddpctl.base-hash"
LABEL_TORCH = "ai.ddpctl.torch.version"
LABEL_CUDA = "ai.ddpctl.cuda.version"

# Minimum Linux driver for each CUDA major version (CUDA's minor-version compatibility: any 12.x
# runtime runs on a >= 525.60.13 driver, any 13.x on >= 580.65.06).
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

STAGE_DIR = Path("build") / "image"  # under the repo root; allowed by .dockerignore


# ------------------------------------------------------------------------------------- pure helpers


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def min_driver_for_cuda(cuda: str) -> str | None:
    """The oldest host driver that runs a CUDA ``cuda`` (e.g. '12.6') runtime; None if unknown."""
    try:
        major = _version_tuple(cuda)[0]
    except ValueError:
        return None
    return MIN_DRIVER.get(major)


@dataclass(frozen=True)
class DriverVerdict:
    ok: bool | None  # None: cannot tell (no CUDA in the image, no driver on the host, unknown CUDA)
    reason: str


def driver_supports(cuda: str | None, driver: str | None) -> DriverVerdict:
    """Is host driver ``driver`` (e.g. '570.86.15') new enough for the image's CUDA ``cuda``?"""
    if not cuda:
        return DriverVerdict(None, "the image has no CUDA (CPU build): any host works")
    need = min_driver_for_cuda(cuda)
    if need is None:
        return DriverVerdict(None, f"no known minimum driver for CUDA {cuda}")
    if not driver:
        return DriverVerdict(None, f"no NVIDIA driver on this host; CUDA {cuda} needs >= {need}")
    try:
        have = _version_tuple(driver)
    except ValueError:
        return DriverVerdict(None, f"cannot read host driver version {driver!r}")
    if have >= _version_tuple(need):
        return DriverVerdict(True, f"host driver {driver} >= {need} needed by CUDA {cuda}")
    return DriverVerdict(False, f"host driver {driver} is older than {need} needed by CUDA {cuda}; "
                                f"upgrade the driver or use an image with an older CUDA")


@dataclass(frozen=True)
class BasePlan:
    """How `ddpctl image base` makes the local base image."""

    tag: str = DEFAULT_LOCAL_BASE
    suite: str = DEFAULT_SUITE
    mirror: str = DEFAULT_MIRROR
    packages: tuple[str, ...] = BASE_PACKAGES

    @property
    def input_hash(self) -> str:
        text = json.dumps([self.suite, self.mirror, sorted(self.packages)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def debootstrap_argv(self, target: str) -> list[str]:
        return ["debootstrap", "--variant=minbase", f"--include={','.join(self.packages)}",
                self.suite, target, self.mirror]

    def import_changes(self) -> list[str]:
        return [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            'CMD ["python3"]',
            f"LABEL {LABEL_BASE_HASH}={self.input_hash} {LABEL_MANAGED_BY}={MANAGED_BY} "
            f"org.opencontainers.image.base.name=debian:{self.suite}",
        ]


@dataclass(frozen=True)
class BuildPlan:
    """Everything that decides what `ddpctl image build` produces."""

    tag: str
    base: str
    cpu: bool
    torch_version: str = TORCH_VERSION
    cuda_version: str = CUDA_VERSION  # "" for a CPU image
    wheelhouse: Path | None = None
    index_url: str | None = None
    ca_file: Path | None = None
    dockerfile: str = "docker/Dockerfile"

    def buildargs(self) -> dict[str, str]:
        return {
            "BASE_IMAGE": self.base,
            "TORCH_VERSION": self.torch_version,
            "CUDA_VERSION": self.cuda_version if not self.cpu else "",
            "INDEX_URL": self.index_url or "",
            "DDPCTL_VERSION": __version__,
        }


def build_plan(*, cpu: bool, base: str | None = None, tag: str | None = None, wheelhouse: Path | None = None,
               index_url: str | None = None, ca_file: Path | None = None,
               torch_version: str = TORCH_VERSION, cuda_version: str = CUDA_VERSION) -> BuildPlan:
    """Defaults: CPU -> local Debian base, tag ddpctl/ddp-train:cpu; CUDA -> pinned pytorch/pytorch."""
    if ca_file is not None and not index_url:
        raise UsageError("--ca-file only applies to --index-url", "add --index-url or drop --ca-file")
    if index_url and not re.match(r"^(https?|file)://", index_url):
        raise UsageError(f"--index-url {index_url!r} is not an http(s):// or file:// URL",
                         "give the URL of a PEP 503 simple index")
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise UsageError(f"wheelhouse {str(wheelhouse)!r} is not a directory",
                         "make one with 'pip download -d DIR torch==2.13.0 ...' or 'make wheelhouse'")
    if ca_file is not None and not ca_file.is_file():
        raise UsageError(f"CA file {str(ca_file)!r} does not exist", "give the path of a PEM bundle")
    return BuildPlan(
        tag=tag or (DEFAULT_CPU_IMAGE if cpu else DEFAULT_GPU_IMAGE),
        base=base or (DEFAULT_LOCAL_BASE if cpu else DEFAULT_CUDA_BASE),
        cpu=cpu, torch_version=torch_version, cuda_version="" if cpu else cuda_version,
        wheelhouse=wheelhouse, index_url=index_url, ca_file=ca_file,
    )


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_hash(plan: BuildPlan, base_id: str, context_files: Iterable[Path]) -> str:
    """Hash of every input of a build: build args, base image id, Dockerfile, wheel, wheelhouse."""
    h = hashlib.sha256()
    h.update(json.dumps(plan.buildargs(), sort_keys=True).encode())
    h.update(base_id.encode())
    for path in sorted(context_files):
        h.update(str(path.name).encode())
        # wheels are immutable by name+size in practice; hashing 200 MB of torch each time costs seconds
        h.update(str(path.stat().st_size).encode() if path.suffix == ".whl" and path.stat().st_size > 1 << 24
                 else _file_digest(path).encode())
    return h.hexdigest()[:16]


# -------------------------------------------------------------------------------------------- engine


def docker_client():
    """A docker-py client that has answered a ping, or an EngineError naming DOCKER_HOST."""
    try:
        import docker
    except ImportError:  # pragma: no cover - a declared dependency
        raise EngineError("the Docker SDK for Python is not installed", "pip install docker") from None
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # DockerException, requests ConnectionError, FileNotFoundError ...
        reason = str(exc).split("\n")[0][:160]
        raise EngineError(f"cannot reach the Docker Engine at {where} ({reason})",
                          "start dockerd (scripts/ci-setup.sh does) or point DOCKER_HOST at a running one") from None
    return client


def image_labels(client, ref: str) -> dict[str, str] | None:
    """The labels of local image ``ref``, or None when it is not present."""
    import docker

    try:
        img = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    return dict(img.labels or {})


def _image_id(client, ref: str) -> str | None:
    import docker

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


# ------------------------------------------------------------------------------------------ progress


class Progress:
    """Build output: one live status line on a terminal, plain lines otherwise (CI logs)."""

    def __init__(self, stream=None, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.step = ""
        self.start = time.monotonic()

    def line(self, text: str) -> None:
        text = text.rstrip("\n")
        if not text.strip():
            return
        if not self.tty:
            print(text, file=self.stream, flush=True)
            return
        if text.startswith("Step "):
            if self.step:
                self._write(f"\u2713 {self.step}\n")
            self.step = text
            self._write(f"\u2026 {self.step}")
            return
        width = shutil.get_terminal_size((100, 20)).columns
        status = f"\u2026 {self.step}  [{time.monotonic() - self.start:5.0f}s] {text.strip()}"
        self._write(status[: width - 1])

    def _write(self, text: str) -> None:
        self.stream.write("\r\x1b[K" + text)
        self.stream.flush()

    def done(self, message: str) -> None:
        if self.tty:
            if self.step:
                self._write(f"\u2713 {self.step}\n")
            self.stream.write("\r\x1b[K")
        print(message, file=self.stream, flush=True)


# ---------------------------------------------------------------------------------------------- base


def build_base(plan: BasePlan, *, force: bool = False, progress: Progress | None = None,
               workdir: Path | None = None) -> str:
    """Make the local Debian base with debootstrap and import it; returns the image id."""
    progress = progress or Progress()
    if os.geteuid() != 0:
        raise UsageError("'ddpctl image base' needs root (debootstrap creates device nodes and chroots)",
                         "run it as root, e.g. 'sudo ddpctl image base'")
    if shutil.which("debootstrap") is None:
        raise UsageError("debootstrap is not installed", "apt-get install debootstrap (scripts/ci-setup.sh does)")
    client = docker_client()
    labels = image_labels(client, plan.tag)
    if labels is not None and labels.get(LABEL_BASE_HASH) == plan.input_hash and not force:
        progress.done(f"{plan.tag} is up to date ({plan.suite}, {', '.join(plan.packages)})")
        return _image_id(client, plan.tag) or ""
    previous_id = _image_id(client, plan.tag)
    parent = workdir or Path(os.environ.get("TMPDIR", "/var/tmp"))
    root = Path(tempfile.mkdtemp(prefix="ddpctl-base-", dir=parent))
    try:
        progress.line(f"debootstrap {plan.suite} from {plan.mirror} into {root}")
        proc = subprocess.Popen(plan.debootstrap_argv(str(root)), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            progress.line(line)
            tail = (tail + [line.strip()])[-3:]
        if proc.wait() != 0:
            raise EngineError(f"debootstrap failed with exit code {proc.returncode} ({' | '.join(tail)})",
                              f"check that the mirror {plan.mirror} is reachable (--mirror URL)")
        # Nothing of apt's download cache belongs in the image.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (root / sub).glob("*"):
                if p.is_file():
                    p.unlink()
        progress.line(f"importing {root} as {plan.tag}")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            repo, _, tag = plan.tag.rpartition(":") if ":" in plan.tag.split("/")[-1] else (plan.tag, "", "latest")
            out = client.api.import_image_from_stream(tar.stdout, repository=repo, tag=tag,
                                                      changes=plan.import_changes())
        finally:
            tar.stdout.close()
            tar.wait()
        if tar.returncode != 0:
            raise EngineError(f"tar of the base root file system failed ({tar.returncode})", "see the messages above")
        status = [json.loads(x) for x in str(out).splitlines() if x.strip().startswith("{")]
        errors = [s["error"] for s in status if "error" in s]
        if errors:
            raise EngineError(f"importing the base image failed: {errors[0]}", "check the Docker daemon's log")
        image_id = _image_id(client, plan.tag) or ""
        if previous_id and previous_id != image_id:
            _drop_if_untagged(client, previous_id)  # the base it replaced, unless an image is built on it
        progress.done(f"built {plan.tag} ({image_id[7:19]}) from debian {plan.suite}")
        return image_id
    finally:
        _unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


def _unmount_below(root: Path) -> None:
    """debootstrap mounts proc/sys inside the target; a failed run can leave them mounted."""
    try:
        # /proc/mounts writes a space in a path as \040 (tab \011, newline \012, backslash \134)
        mounts = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[1])
                  for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(str(root) + "/")), reverse=True):
        subprocess.run(["umount", "-l", m], check=False, capture_output=True)


# --------------------------------------------------------------------------------------------- build


def find_source_root(start: Path | None = None) -> Path:
    """The ddpctl source checkout (it holds docker/Dockerfile and pyproject.toml)."""
    candidates = [start] if start else [Path.cwd(), Path(__file__).resolve().parents[2]]
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


def image_requirements(plan: BuildPlan, wheel: Path) -> list[str]:
    """What stage 1 installs: torch (skipped there when the base has it) and ddpctl's dependencies."""
    # numpy: torch's optional array interop; without it every process warns at import
    return [f"torch=={plan.torch_version}", "numpy", *wheel_requirements(wheel)]


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
    if plan.wheelhouse is not None:
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


def build_image(plan: BuildPlan, *, root: Path | None = None, progress: Progress | None = None,
                force: bool = False, nocache: bool = False) -> BuildResult:
    """Build ``plan`` with the Docker SDK; skipped when an image with the same input hash exists."""
    t0 = time.monotonic()
    progress = progress or Progress()
    root = root or find_source_root()
    client = docker_client()
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
        _tidy_build(client, trace, None, None)
        raise EngineError(f"building {plan.tag} failed: {error[:300]}", "read the build output above")
    image_id = image_id or _image_id(client, plan.tag) or ""
    if previous_id and previous_id != image_id:
        _drop_if_untagged(client, previous_id)
    _tidy_build(client, trace, image_id, deps_tag(plan.tag))
    seconds = time.monotonic() - t0
    final = image_labels(client, plan.tag) or {}
    progress.done(f"built {plan.tag} ({image_id[7:19]}) in {seconds:.0f}s: torch {final.get(LABEL_TORCH, '?')}, "
                  f"CUDA {final.get(LABEL_CUDA) or 'none'}")
    return BuildResult(plan.tag, image_id, False, seconds, final)


class BuildTrace:
    """Reads the legacy builder's output: the image id after each step and where each stage ended."""

    _STEP_ID = re.compile(r"^\s*---> ([0-9a-f]{12,64})\s*$")
    _FROM = re.compile(r"^Step \d+/\d+ : FROM ", re.IGNORECASE)

    def __init__(self) -> None:
        self.ids: list[str] = []  # every step's image id, in order
        self.stage_ends: list[str] = []  # the last image of each finished stage but the final one
        self._froms = 0

    def feed(self, line: str) -> None:
        m = self._STEP_ID.match(line)
        if m:
            self.ids.append(m.group(1))
        elif self._FROM.match(line):
            if self._froms and self.ids:
                self.stage_ends.append(self.ids[-1])
            self._froms += 1


def deps_tag(tag: str) -> str:
    """Tag of the first build stage (torch and the dependencies), kept as the build cache of ``tag``."""
    from docker.utils import parse_repository_tag

    repo, version = parse_repository_tag(tag)
    if version and version.startswith("sha256:"):
        version = None
    return f"{repo}:{version or 'latest'}-deps"


def _dangling_ids(client) -> set[str]:
    try:
        return {img.id for img in client.images.list(filters={"dangling": True})}
    except Exception:  # noqa: BLE001 - an engine that cannot list: nothing to tidy
        return set()


def _tidy_build(client, trace: BuildTrace, final_id: str | None, cache_tag: str | None) -> None:
    """Leave no ``<none>`` image behind from this build (only ids this build printed are touched).

    The legacy builder keeps the last image of every earlier stage untagged and childless: the first stage
    (the venv with torch) is the layer cache that makes a rebuild after a code change take seconds, so it
    is tagged ``<tag>-deps`` (the one it replaces is removed); after a failed build, the partial step
    images are removed.
    """
    keep = set()
    if final_id and cache_tag and trace.stage_ends:
        stage = _image_id(client, trace.stage_ends[0])  # also when a cached stage already has another tag
        if stage:
            previous = _image_id(client, cache_tag)
            repo, _, version = cache_tag.rpartition(":")
            try:
                client.images.get(stage).tag(repo, version)
                keep.add(stage)
                if previous and previous != stage:
                    _drop_if_untagged(client, previous)
            except Exception:  # noqa: BLE001 - could not tag: removed below like the rest
                pass
    dangling = _dangling_ids(client)
    ours = {i for short in trace.ids for i in dangling if i.split(":", 1)[-1].startswith(short)}
    for image in ours - keep:
        _drop_if_untagged(client, image)


def _drop_if_untagged(client, image_id: str) -> None:
    """An image nothing names any more (the one a rebuild replaced, a stage cache): remove it and its untagged
    parents that nothing else uses, so no ``<none>`` image is left; shared layers stay cached."""
    try:
        img = client.images.get(image_id)
        if not img.tags:
            client.images.remove(image_id, noprune=False)
    except Exception:  # noqa: BLE001 - in use by a container or another image, or already gone: leave it
        pass


# What a registry failure looks like in the daemon's pull error, and ddpctl's own words for it.
_UNREACHABLE = ("no such host", "lookup ", "dial tcp", "i/o timeout", "connection refused", "network is unreachable",
                "tls handshake timeout", "client.timeout", "temporary failure in name resolution", "server misbehaving",
                "connection reset", "no route to host", "eof")
_NOT_THERE = ("not found", "manifest unknown", "pull access denied", "unauthorized", "denied", "does not exist")
PULL_FIX = ("pull it on a machine that reaches the registry and move it here ('docker save IMAGE | docker load'), "
            "pass --base with an image this engine already has, or build the CPU image offline with "
            "'make image-cpu'")


def pull_failure_reason(daemon_error: str) -> str:
    """The daemon's raw pull error (DNS, TLS, HTTP) as a short reason in ddpctl's words."""
    text = daemon_error.lower()
    if any(k in text for k in _UNREACHABLE):
        return "no registry is reachable from the Docker Engine"
    if any(k in text for k in _NOT_THERE):
        return "the registry has no such image or refuses access to it"
    first = " ".join(daemon_error.split())
    return f"the registry answered: {first[:120]}"


def pull_base(client, ref: str, progress: Progress) -> str:
    """Pull a base image the engine does not have; returns its id. A failed pull is one line with the fix."""
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    progress.line(f"pulling base image {ref} (not present on this Docker Engine)")
    error = None
    try:
        for ev in client.api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in ev:
                error = str(ev.get("error") or ev.get("errorDetail") or "pull failed")
            elif ev.get("status") and not ev.get("progressDetail"):
                progress.line(f"{ev.get('id', '')} {ev['status']}".strip())
    except Exception as exc:  # APIError / NotFound / connection errors from docker-py
        error = getattr(exc, "explanation", None) or str(exc)
    image_id = None if error else _image_id(client, ref)
    if image_id is None:
        raise EngineError(f"cannot pull base image {ref}: {pull_failure_reason(str(error or 'not found'))}",
                          PULL_FIX)
    return image_id


def probe_torch(client, image: str) -> tuple[str, str] | None:
    """(torch version, CUDA version or '') of the torch in ``image``, None when it has none.

    Runs the image once with no GPU request and removes the container afterwards."""
    code, out = _run_once(client, image, ["python3", "-c", "import torch; print('TORCH', torch.__version__, "
                                                          "torch.version.cuda or '')"])
    for line in out.splitlines():
        if code == 0 and line.startswith("TORCH "):
            parts = line.split()
            return parts[1], parts[2] if len(parts) > 2 else ""
    return None


def _run_once(client, image: str, argv: list[str], device_requests=None) -> tuple[int, str]:
    """Run ``argv`` in ``image`` once and remove the container whatever happens."""
    container = None
    try:
        container = client.containers.create(image, argv, labels={LABEL_MANAGED_BY: MANAGED_BY,
                                                                  "ddpctl.purpose": "image-check"},
                                             device_requests=device_requests, network_mode="none")
        container.start()
        code = container.wait(timeout=300).get("StatusCode", 1)
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return int(code), logs
    except Exception as exc:
        raise EngineError(f"running {image} failed ({str(exc).splitlines()[0][:200]})",
                          "check the image with 'docker run --rm IMAGE python3 -V'") from None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - best effort; the error above matters more
                pass


# --------------------------------------------------------------------------------------------- check

CHECK_SCRIPT = r"""
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
except Exception as exc:
    out["error"] = f"torch does not import: {exc}"
    print(json.dumps(out)); sys.exit(0)
out["torch"] = torch.__version__
out["cuda"] = torch.version.cuda
out["cudnn"] = None
out["nccl"] = None
out["gpus"] = []
try:
    if torch.backends.cudnn.is_available():
        v = torch.backends.cudnn.version()
        out["cudnn"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v and v >= 10000 else str(v)
except Exception:
    pass
try:
    if torch.cuda.is_available():
        out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if torch.version.cuda and hasattr(torch.cuda, "nccl"):
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
except Exception as exc:
    out["cuda_error"] = str(exc).splitlines()[0]
out["distributed"] = torch.distributed.is_available()
out["gloo"] = out["distributed"] and torch.distributed.is_gloo_available()
import shutil
out["torchrun"] = shutil.which("torchrun")
out["ddp_train"] = shutil.which("ddp-train")
print(json.dumps(out))
"""


def host_driver_version(nvidia_smi: str | None = None) -> str | None:
    """The host's NVIDIA driver version from nvidia-smi, or None when there is none."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [x.strip() for x in out.stdout.splitlines() if x.strip()]
    return lines[0] if out.returncode == 0 and lines else None


def host_gpu_count(nvidia_smi: str | None = None) -> int:
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if not exe:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for x in out.stdout.splitlines() if x.startswith("GPU ")) if out.returncode == 0 else 0


def engine_has_nvidia_runtime(client) -> bool:
    try:
        return "nvidia" in (client.info().get("Runtimes") or {})
    except Exception:  # noqa: BLE001
        return False


@dataclass
class CheckReport:
    image: str
    facts: dict
    labels: dict[str, str]
    driver: str | None
    verdict: DriverVerdict
    gpus_requested: bool

    @property
    def ok(self) -> bool:
        return "error" not in self.facts and self.verdict.ok is not False

    def rows(self) -> list[tuple[str, str]]:
        f = self.facts
        gpus = f.get("gpus") or []
        seen = (", ".join(gpus) if gpus else "none") + ("" if self.gpus_requested else " (no GPU requested)")
        return [
            ("image", self.image),
            ("python", f.get("python", "?")),
            ("torch", f.get("torch") or f.get("error", "?")),
            ("CUDA", f.get("cuda") or "none (CPU build)"),
            ("cuDNN", f.get("cudnn") or "none"),
            ("NCCL", f.get("nccl") or "none"),
            ("gloo", "yes" if f.get("gloo") else "no"),
            ("torchrun", f.get("torchrun") or "missing"),
            ("ddp-train", f.get("ddp_train") or "missing"),
            ("GPUs seen", seen),
            ("host driver", self.driver or "none"),
            ("driver check", ("ok: " if self.verdict.ok else "FAIL: " if self.verdict.ok is False else "n/a: ")
             + self.verdict.reason),
        ]


def check_image(image: str, *, nvidia_smi: str | None = None) -> CheckReport:
    client = docker_client()
    labels = image_labels(client, image)
    if labels is None:
        raise EngineError(f"image {image} is not present on this Docker Engine",
                          "build it ('make image-cpu' or 'ddpctl image build') or pull it")
    driver = host_driver_version(nvidia_smi)
    # A GPU request without the NVIDIA runtime fails and leaves a container behind: ask only when it can work.
    request = None
    if driver and engine_has_nvidia_runtime(client):
        from docker.types import DeviceRequest

        request = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    code, logs = _run_once(client, image, ["python3", "-c", CHECK_SCRIPT], device_requests=request)
    lines = [x for x in logs.splitlines() if x.startswith("{")]
    if code != 0 or not lines:
        tail = (logs.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{image} could not run the check (exit {code}: {tail[:200]})",
                          "the image needs python3 on PATH")
    facts = json.loads(lines[-1])
    cuda = facts.get("cuda") or None
    return CheckReport(image, facts, labels, driver, driver_supports(cuda, driver), request is not None)


__all__ = [
    "BasePlan", "BuildPlan", "BuildResult", "CheckReport", "DriverVerdict", "Progress",
    "build_base", "build_image", "build_plan", "check_image", "driver_supports", "min_driver_for_cuda",
    "host_driver_version", "host_gpu_count", "docker_client",
]
