"""What an image build is made of, as pure values: pinned versions, labels, the CUDA -> driver table, the
base and build plans and the build's input hash. No I/O but reading the files that are hashed."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ddpctl import __version__
from ddpctl.errors import UsageError
from ddpctl.launch import LABEL_MANAGED_BY, MANAGED_BY
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
# `--base local`: the CUDA image with no registry, on a CUDA base made here (images.torch_base)
LOCAL_PRESET = "local"




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
    local_base: bool = False  # --base local: the CUDA base is made here (images.torch_base), not pulled

    def buildargs(self) -> dict[str, str]:
        return {
            "BASE_IMAGE": self.base,
            "TORCH_VERSION": self.torch_version,
            "CUDA_VERSION": self.cuda_version if not self.cpu else "",
            "INDEX_URL": self.index_url or "",
            "DDPCTL_VERSION": __version__,
        }


def refuse_index_credentials(index_url: str | None) -> None:
    """The ddp-train image's first stage takes the index as a build argument, which the legacy builder keeps in
    the history of the local cache image (<tag>-deps): no credential may go there (workspace images install
    their requirements in a committed container instead, ddpctl.images.workspace_requirements)."""
    if index_url and "://" in index_url and "@" in index_url.split("://", 1)[1].split("/", 1)[0]:
        from ddpctl.images.requirements_file import shown

        raise UsageError(f"--index-url {shown(index_url)} carries credentials, which a build argument would keep "
                         "in the cache image's history", "download the wheels on the host ('pip download -d DIR "
                         "torch==2.13.0 ...' with the index in pip's own config) and pass --wheelhouse DIR")


def build_plan(*, cpu: bool, base: str | None = None, tag: str | None = None, wheelhouse: Path | None = None,
               index_url: str | None = None, ca_file: Path | None = None,
               torch_version: str = TORCH_VERSION, cuda_version: str = CUDA_VERSION) -> BuildPlan:
    """Defaults: CPU -> local Debian base, tag ddpctl/ddp-train:cpu; CUDA -> pinned pytorch/pytorch."""
    if ca_file is not None and not index_url:
        raise UsageError("--ca-file only applies to --index-url", "add --index-url or drop --ca-file")
    if index_url and not re.match(r"^(https?|file)://", index_url):
        from ddpctl.images.requirements_file import shown

        raise UsageError(f"--index-url {shown(index_url)} is not an http(s):// or file:// URL",
                         "give the URL of a PEP 503 simple index")
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise UsageError(f"wheelhouse {str(wheelhouse)!r} is not a directory",
                         "make one with 'pip download -d DIR torch==2.13.0 ...' or 'make wheelhouse'")
    if ca_file is not None and not ca_file.is_file():
        raise UsageError(f"CA file {str(ca_file)!r} does not exist", "give the path of a PEM bundle")
    local = base == LOCAL_PRESET
    if local and cpu:
        base = DEFAULT_LOCAL_BASE  # the CPU image is always made on the local base
    elif local:
        base = f"ddpctl/torch:{torch_version}-cuda{cuda_version}-cudnn9-runtime"  # = torch_base.tag_for()
    return BuildPlan(
        tag=tag or (DEFAULT_CPU_IMAGE if cpu else DEFAULT_GPU_IMAGE),
        base=base or (DEFAULT_LOCAL_BASE if cpu else DEFAULT_CUDA_BASE),
        cpu=cpu, torch_version=torch_version, cuda_version="" if cpu else cuda_version,
        wheelhouse=wheelhouse, index_url=index_url, ca_file=ca_file, local_base=local and not cpu,
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
    from ddpctl.images.requirements_file import redact

    args = plan.buildargs()
    args["INDEX_URL"] = redact(args["INDEX_URL"])  # no hash (a label) derives from a password
    h.update(json.dumps(args, sort_keys=True).encode())
    h.update(base_id.encode())
    for path in sorted(context_files):
        h.update(str(path.name).encode())
        # wheels are immutable by name+size in practice; hashing 200 MB of torch each time costs seconds
        h.update(str(path.stat().st_size).encode() if path.suffix == ".whl" and path.stat().st_size > 1 << 24
                 else _file_digest(path).encode())
    return h.hexdigest()[:16]
