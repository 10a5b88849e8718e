"""The local CUDA base (``--base local``): what ``pytorch/pytorch:<torch>-cuda<cuda>-cudnn9-runtime`` gives, made
with no container registry: the local Debian base (``ddpctl image base``) plus the CUDA build of torch and its
``nvidia-*`` runtime wheels (cuDNN, NCCL, cuBLAS, ...), downloaded by pip on this host into a wheelhouse cached
by versions, plus a C compiler (Triton builds its launcher with one when torch.compile runs on a GPU).

What training does not need is left out: static libraries, C/C++ headers of the CUDA wheels and torch (no
extension is compiled in a runtime image), pip's caches, and the wheelhouse itself (installed in a first build
stage; only the installed tree is copied into the image, in one layer). The image is tagged
``ddpctl/torch:<torch>-cuda<cuda>-cudnn9-runtime`` and reused while its inputs (local base, versions,
Dockerfile) are the same: an up-to-date base needs no wheelhouse at all.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from ddpctl import __version__, dockerengine
from ddpctl.dockerengine.tools import image_id as _image_id
from ddpctl.dockerengine.tools import image_labels
from ddpctl.errors import EngineError, UsageError
from ddpctl.images import build_lock, host_wheels
from ddpctl.images.plans import DEFAULT_LOCAL_BASE, LABEL_BASE_HASH, LABEL_CUDA, LABEL_TORCH
from ddpctl.images.tidy import BuildTrace, drop_if_untagged, tidy_build
from ddpctl.images.workspace_build import run_build
from ddpctl.launch import LABEL_MANAGED_BY, LABEL_VERSION, MANAGED_BY

REPOSITORY = "ddpctl/torch"
SYSTEM_PACKAGES = ("gcc", "libc6-dev")
_MTIME = 315532800

# Run in the first stage on the installed tree (/stage/usr/local): what a runtime image does not need. (Its text
# is part of the base's content key. With torch 2.13's wheels the duplicate-library step finds nothing: the CUPTI
# that Triton bundles is another version than the CUDA 13 wheel's.)
SLIM_SCRIPT = r"""set -eu
SP="$1/lib/python3.$(python3 -c 'import sys; print(sys.version_info[1])')/dist-packages"
before=$(du -sm "$1" | cut -f1)
find "$1" -name '*.a' -type f -delete
find "$SP/nvidia" -mindepth 2 -maxdepth 3 -type d -name include -prune -exec rm -rf {} +
rm -rf "$SP/torch/include" "$SP/torch/share/cmake" "$SP/torch/lib/cmake" "$SP"/torch/bin/protoc* \
       "$SP/triton/backends/amd"
find "$1" -type d -name tests -path '*/numpy/*' -prune -exec rm -rf {} +
# CUDA libraries no torch library links or opens: multi-GPU cuSOLVER, the "alt" NVRTC build
rm -f "$SP"/nvidia/*/lib/libcusolverMg.so.* "$SP"/nvidia/*/lib/libnvrtc.alt.so.* \
      "$SP"/nvidia/*/lib/libnvrtc-builtins.alt.so.*
# the same library in two wheels (Triton bundles CUPTI's): one copy, the other a relative symbolic link (the
# legacy builder's COPY --from does not keep hard links)
python3 - "$1" <<'PY'
import hashlib, os, sys
seen = {}
for d, _, files in sorted(os.walk(sys.argv[1])):
    for f in sorted(files):
        p = os.path.join(d, f)
        if os.path.islink(p) or os.path.getsize(p) < 1 << 20:
            continue
        h = hashlib.sha256(open(p, "rb").read()).hexdigest()
        if h in seen:
            os.unlink(p)
            os.symlink(os.path.relpath(seen[h], d), p)
        else:
            seen[h] = p
PY
echo "slim: $before MB -> $(du -sm "$1" | cut -f1) MB"
"""


def tag_for(torch_version: str, cuda_version: str) -> str:
    return f"{REPOSITORY}:{torch_version}-cuda{cuda_version}-cudnn9-runtime"


def requirements(torch_version: str) -> list[str]:
    # numpy: torch's array interop (every process warns at import without it)
    return [f"torch=={torch_version}", "numpy"]


def dockerfile(base: str, labels: dict[str, str]) -> str:
    pip = ("PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install "
           "--progress-bar off --break-system-packages --no-index --no-warn-script-location "
           "--find-links /tmp/ddpctl/wheelhouse --root /stage -r /tmp/ddpctl/requirements.txt")
    return "\n".join([
        f"FROM {base} AS wheels",
        "COPY requirements.txt /tmp/ddpctl/",
        "COPY wheelhouse/ /tmp/ddpctl/wheelhouse/",
        f"RUN {pip} && rm -rf /tmp/ddpctl/wheelhouse",
        "COPY slim.sh /tmp/ddpctl/",
        "RUN sh /tmp/ddpctl/slim.sh /stage/usr/local",
        f"FROM {base}",
        "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -q -y --no-install-recommends "
        f"{' '.join(SYSTEM_PACKAGES)} && apt-get clean && rm -rf /var/lib/apt/lists/*",
        "COPY --from=wheels /stage/usr/local/ /usr/local/",
        "RUN python3 -c \"import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, "
        "'cuDNN', torch.backends.cudnn.version())\"",
        "LABEL " + " ".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items())),
        "",
    ])


def input_hash(base_id: str, torch_version: str, cuda_version: str) -> str:
    doc = [base_id, requirements(torch_version), cuda_version, SYSTEM_PACKAGES, SLIM_SCRIPT,
           dockerfile(DEFAULT_LOCAL_BASE, {})]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]


def cuda_wheelhouse(target: host_wheels.Target, torch_version: str, cuda_version: str, *, progress,
                    index_url: str | None = None, ca_file: Path | None = None) -> Path:
    """The CUDA torch wheels for ``target``, downloaded once into the cache (keyed by versions and index)."""
    index_args = (["--index-url", index_url] if index_url else []) + (["--cert", str(ca_file)] if ca_file else [])
    key = hashlib.sha256(json.dumps([requirements(torch_version), index_url]).encode()).hexdigest()[:8]
    name = f"torch{torch_version}-cuda{cuda_version}-cp{target.python.replace('.', '')}-{target.machine}-{key}"
    final = build_lock.cache_root() / "wheelhouse" / name
    if final.is_dir():
        wheels = sorted(final.glob("*.whl"))
        progress.line(f"wheelhouse {final}: {len(wheels)} wheels, "
                      f"{sum(p.stat().st_size for p in wheels) / 1e9:.2f} GB (cached)")
        return final
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    progress.line(f"downloading torch {torch_version} (CUDA {cuda_version}) and its CUDA libraries with pip on this "
                  f"host for {target.describe()} into {final} (about 3 GB, once)")
    wh = host_wheels.download(requirements(torch_version), partial, target, index_args=index_args,
                             skip_find_links=True)
    torch_wheels = [w for w in wh.wheels if w.startswith("torch-")]
    if not any(w.startswith(f"torch-{torch_version}-") for w in torch_wheels):
        shutil.rmtree(partial, ignore_errors=True)
        raise UsageError(f"the index gave {torch_wheels or 'no torch wheel'}, not the CUDA build torch {torch_version}",
                         "point pip at an index with the CUDA wheels (PyPI has them), or pass --wheelhouse DIR")
    if not any(w.startswith("nvidia_cudnn") for w in wh.wheels) or not any(w.startswith("nvidia_nccl")
                                                                           for w in wh.wheels):
        shutil.rmtree(partial, ignore_errors=True)
        raise UsageError(f"torch {torch_version} from this index brings no cuDNN/NCCL wheels (a CPU build?)",
                         "point pip at an index with the CUDA wheels (PyPI has them), or pass --wheelhouse DIR")
    partial.rename(final)
    progress.line(f"wheelhouse {final}: {wh.summary()}")
    return final


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, path: Path | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = 0o644, _MTIME
    if path is not None:
        info.size = path.stat().st_size
        with open(path, "rb") as fh:
            tar.addfile(info, fh)
    elif data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)


def _context(text: str, torch_version: str, wheelhouse: Path):
    buf = tempfile.TemporaryFile(dir=os.environ.get("TMPDIR", "/var/tmp"))
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add(tar, "Dockerfile", text.encode())
        _add(tar, "requirements.txt", "".join(f"{r}\n" for r in requirements(torch_version)).encode())
        _add(tar, "slim.sh", SLIM_SCRIPT.encode())
        _add(tar, "wheelhouse")
        for whl in sorted(wheelhouse.iterdir()):
            if whl.is_file() and whl.suffix in (".whl", ".gz", ".zip"):
                _add(tar, f"wheelhouse/{whl.name}", path=whl)
    buf.seek(0)
    return buf


def build_torch_base(torch_version: str, cuda_version: str, *, progress, wheelhouse: Path | None = None,
                     index_url: str | None = None, ca_file: Path | None = None, force: bool = False) -> str:
    """Make (or find up to date) the local CUDA base; returns its tag."""
    tag = tag_for(torch_version, cuda_version)
    client = dockerengine.connect()
    base_id = _image_id(client, DEFAULT_LOCAL_BASE)
    if base_id is None:
        raise EngineError(f"base image {DEFAULT_LOCAL_BASE} is not present on this Docker Engine",
                          "build it offline with 'ddpctl image base' (make image CUDA_BASE=local does)")
    key = input_hash(base_id, torch_version, cuda_version)
    labels = image_labels(client, tag)
    if labels is not None and labels.get(LABEL_BASE_HASH) == key and not force:
        progress.line(f"{tag} is up to date (inputs {key})")
        return tag
    t0 = time.monotonic()
    if wheelhouse is None:
        target = host_wheels.probe(client, DEFAULT_LOCAL_BASE).target
        wheelhouse = cuda_wheelhouse(target, torch_version, cuda_version, progress=progress, index_url=index_url,
                                     ca_file=ca_file)
    image_labels_ = {LABEL_BASE_HASH: key, LABEL_MANAGED_BY: MANAGED_BY, LABEL_VERSION: __version__,
                     LABEL_TORCH: torch_version, LABEL_CUDA: cuda_version,
                     "org.opencontainers.image.base.name": DEFAULT_LOCAL_BASE}
    previous = _image_id(client, tag)
    progress.line(f"building {tag} on {DEFAULT_LOCAL_BASE} from {wheelhouse}")
    image_id = _build(client, _context(dockerfile(DEFAULT_LOCAL_BASE, image_labels_), torch_version, wheelhouse),
                      tag, progress)
    if previous and previous != image_id:
        drop_if_untagged(client, previous)
    progress.line(f"built {tag} ({image_id[7:19]}) in {time.monotonic() - t0:.0f}s")
    return tag


def _build(client, context, tag: str, progress) -> str:
    trace = BuildTrace()
    image_id = run_build(client, context, tag=tag, labels={}, buildargs=None, progress=progress, what=f"image {tag}",
                         trace=trace)
    tidy_build(client, trace, image_id, None)  # the first stage (wheelhouse + install) is not kept
    return image_id
