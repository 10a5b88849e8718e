"""Last step of docker/Dockerfile: the image's labels must tell the truth, and the entrypoints must exist.

Fails the build when torch or CUDA differ from the TORCH_VERSION / CUDA_VERSION build arguments that become
the image's labels (ddpctl image build sets them from the base image or the torch it installs).
"""

import os
import shutil
import sys

import torch

want_torch = os.environ["TORCH_VERSION"]
want_cuda = os.environ.get("CUDA_VERSION", "")
have_cuda = torch.version.cuda or ""
problems = []
if torch.__version__.split("+")[0] != want_torch:
    problems.append(f"torch is {torch.__version__}, the label would say {want_torch}")
if have_cuda != want_cuda and not (want_cuda and have_cuda.startswith(want_cuda + ".")):
    problems.append(f"torch's CUDA is {have_cuda or 'none'}, the label would say {want_cuda or 'none'}")
for exe in ("torchrun", "ddp-train"):
    if shutil.which(exe) is None:
        problems.append(f"{exe} is not on PATH")
try:
    import cloudpickle  # noqa: F401  (ddpctl.run carries the caller's function to the ranks with it)
except ImportError:
    problems.append("cloudpickle is not installed (ddpctl.run needs it)")
if not torch.distributed.is_available():
    problems.append("torch.distributed is not available")
if problems:
    print("image check failed: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"image ok: torch {torch.__version__}, CUDA {have_cuda or 'none'}, torchrun {shutil.which('torchrun')}")
