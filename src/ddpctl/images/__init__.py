"""Container images: the local Debian base, the ddp-train image build, and the image check.

Three commands, each split into a pure planning step (:mod:`~ddpctl.images.plans`) and a thin side-effect step:

- :mod:`~ddpctl.images.base` (``ddpctl image base``): an air-gapped base image (Debian + Python from an apt
  mirror) made with ``debootstrap`` and imported into the engine;
- :mod:`~ddpctl.images.build` (``ddpctl image build``): ``docker/Dockerfile`` built through the Docker SDK,
  reused when its recorded input hash matches;
- :mod:`~ddpctl.images.check` (``ddpctl image check``): run the image once, report torch / CUDA / cuDNN / NCCL
  and the GPUs it sees, and compare the host driver against the minimum the image's CUDA needs.

The engine connection is :func:`ddpctl.dockerengine.connect` (shared with the local cluster's
:class:`~ddpctl.dockerengine.docker_engine.DockerEngine`); the host's nvidia-smi is read by :mod:`ddpctl.host_gpus`. The
``docker`` package is imported lazily, only in functions that talk to the engine.
"""

from __future__ import annotations

from ddpctl.images.base import build_base
from ddpctl.images.build import (
    BuildResult,
    build_image,
    build_wheel,
    find_source_root,
    image_requirements,
    probe_torch,
    stage_context,
    wheel_requirements,
)
from ddpctl.images.build_output import BuildProgress
from ddpctl.images.check import CHECK_SCRIPT, CheckReport, check_image
from ddpctl.images.plans import (
    BASE_PACKAGES,
    CUDA_VERSION,
    DEFAULT_CUDA_BASE,
    DEFAULT_LOCAL_BASE,
    DEFAULT_MIRROR,
    DEFAULT_SUITE,
    LABEL_BASE_HASH,
    LABEL_BUILD_HASH,
    LABEL_CUDA,
    LABEL_TORCH,
    MIN_DRIVER,
    STAGE_DIR,
    TORCH_VERSION,
    BasePlan,
    BuildPlan,
    DriverVerdict,
    build_hash,
    build_plan,
    driver_supports,
    min_driver_for_cuda,
)
from ddpctl.images.pull import PULL_FIX, pull_base, pull_failure_reason
from ddpctl.images.tidy import BuildTrace, deps_tag, tidy_build

__all__ = [
    "BASE_PACKAGES", "CHECK_SCRIPT", "CUDA_VERSION", "DEFAULT_CUDA_BASE", "DEFAULT_LOCAL_BASE", "DEFAULT_MIRROR",
    "DEFAULT_SUITE", "LABEL_BASE_HASH", "LABEL_BUILD_HASH", "LABEL_CUDA", "LABEL_TORCH", "MIN_DRIVER", "STAGE_DIR",
    "TORCH_VERSION", "BasePlan", "BuildPlan", "BuildResult", "CheckReport", "DriverVerdict", "BuildProgress",
    "build_base", "build_hash", "build_image", "build_plan", "build_wheel", "check_image", "driver_supports",
    "find_source_root", "image_requirements", "min_driver_for_cuda", "probe_torch", "stage_context",
    "wheel_requirements", "BuildTrace", "tidy_build", "deps_tag", "PULL_FIX", "pull_base", "pull_failure_reason",
]
