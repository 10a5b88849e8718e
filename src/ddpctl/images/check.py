"""``ddpctl image check``: run the image once, report torch / CUDA / cuDNN / NCCL and the GPUs it sees, and
compare the host driver against the minimum the image's CUDA needs (:func:`~ddpctl.images.plans.driver_supports`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ddpctl import dockerengine
from ddpctl import host_gpus as host
from ddpctl.dockerengine.tools import has_nvidia_runtime, image_labels, run_once
from ddpctl.errors import EngineError
from ddpctl.images.plans import DriverVerdict, driver_supports

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
out["libs"] = libs = {}
if torch.version.cuda:  # the CUDA libraries themselves, loaded and asked their version: no GPU or driver needed
    import ctypes, glob, os
    def find(soname):
        for base in sys.path:
            hits = sorted(glob.glob(os.path.join(base, "nvidia", "**", soname), recursive=True))
            if hits:
                return hits[0]
        return soname  # the dynamic linker's search (LD_LIBRARY_PATH, ld.so.cache)
    def dotted(v, scale):
        return f"{v // scale}.{v % scale // (scale // 100)}.{v % (scale // 100)}"
    major = torch.version.cuda.split(".")[0]
    for key, soname, ask in (
            ("cudart", f"libcudart.so.{major}", lambda l: (lambda v: (l.cudaRuntimeGetVersion(ctypes.byref(v)),
                f"{v.value // 1000}.{v.value % 1000 // 10}")[1])(ctypes.c_int())),
            ("cublas", f"libcublas.so.{major}", lambda l: ".".join(str((lambda v: (l.cublasGetProperty(i,
                ctypes.byref(v)), v.value)[1])(ctypes.c_int())) for i in range(3))),
            ("cudnn", "libcudnn.so.9", lambda l: (setattr(l.cudnnGetVersion, "restype", ctypes.c_size_t),
                dotted(l.cudnnGetVersion(), 10000))[1]),
            ("nccl", "libnccl.so.2", lambda l: (lambda v: (l.ncclGetVersion(ctypes.byref(v)),
                dotted(v.value, 10000))[1])(ctypes.c_int()))):
        path = find(soname)
        try:
            lib = ctypes.CDLL(path)
            libs[key] = {"so": soname, "path": path, "version": ask(lib)}
        except Exception as exc:
            libs[key] = {"so": soname, "path": path, "error": str(exc).splitlines()[0][:200]}
    bad = [f"{v['so']} ({v['error']})" for v in libs.values() if "error" in v]
    if bad:
        out["error"] = "CUDA libraries do not load: " + "; ".join(bad)
out["distributed"] = torch.distributed.is_available()
out["gloo"] = out["distributed"] and torch.distributed.is_gloo_available()
import shutil
out["torchrun"] = shutil.which("torchrun")
out["ddp_train"] = shutil.which("ddp-train")
print(json.dumps(out))
"""

def _nvidia_runtime(client) -> bool:
    try:
        return has_nvidia_runtime(client)
    except Exception:  # noqa: BLE001 - cannot tell: no GPU request
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
            ("CUDA libraries", libs_row(f.get("libs") or {})),
            ("gloo", "yes" if f.get("gloo") else "no"),
            ("torchrun", f.get("torchrun") or "missing"),
            ("ddp-train", f.get("ddp_train") or "missing"),
            ("GPUs seen", seen),
            ("host driver", self.driver or "none"),
            ("driver check", ("ok: " if self.verdict.ok else "FAIL: " if self.verdict.ok is False else "n/a: ")
             + self.verdict.reason),
        ]


def libs_row(libs: dict) -> str:
    """The CUDA runtime libraries the check loaded in the container, with the version each reports."""
    if not libs:
        return "none (CPU build)"
    return ", ".join(f"{v['so']} {v.get('version') or 'FAILED: ' + v.get('error', '?')}" for v in libs.values()) \
        + " (loaded, no GPU needed)"


def check_image(image: str, *, nvidia_smi: str | None = None) -> CheckReport:
    client = dockerengine.connect()
    labels = image_labels(client, image)
    if labels is None:
        raise EngineError(f"image {image} is not present on this Docker Engine",
                          "build it ('make image-cpu' or 'ddpctl image build') or pull it")
    driver = host.driver_version(nvidia_smi)
    # A GPU request without the NVIDIA runtime fails and leaves a container behind: ask only when it can work.
    request = None
    if driver and _nvidia_runtime(client):
        from docker.types import DeviceRequest

        request = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    code, logs = run_once(client, image, ["python3", "-c", CHECK_SCRIPT], device_requests=request)
    lines = [x for x in logs.splitlines() if x.startswith("{")]
    if code != 0 or not lines:
        tail = (logs.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{image} could not run the check (exit {code}: {tail[:200]})",
                          "the image needs python3 on PATH")
    facts = json.loads(lines[-1])
    cuda = facts.get("cuda") or None
    return CheckReport(image, facts, labels, driver, driver_supports(cuda, driver), request is not None)
