"""When a workspace image is built (``render --push``, ``up --bake``, ``ddpctl.up(bake=True)``) and the rules of its
pip options: the command line and the Python API apply the same ones."""

from __future__ import annotations

import os
from typing import Any


def asked_to_build(spec, flag_given: bool, *, flag: str, source: str | None) -> bool:
    """Is a workspace image to be built? Only when the command line asks (``flag``: --push for render, --bake for
    up): a job file is input from elsewhere, and reading a host directory into an image (and pushing it) is a
    side effect it alone may not cause. A file's ``workspace:`` without the flag is refused in one line."""
    w = spec.workspace
    if flag_given:
        return True
    if (flag == "--bake" and w.dir) or (flag == "--push" and w.repository and "@sha256:" not in spec.image):
        import shlex

        from ddpctl.errors import UsageError

        what = f"build {w.dir or spec.resolved_workdir or 'the workdir'} into an image" + (
            f" and push it to {w.repository}" if flag == "--push" and w.repository else "")
        again = shlex.join([flag, w.repository] if flag == "--push" and w.repository else [flag])
        raise UsageError(f"{source or 'the job file'} asks to {what}; ddpctl builds and pushes only when the "
                         "command line asks", f"add {again} to do that, or remove the workspace: "
                         "section from the file")
    return False


def pip_options(kw: dict[str, Any]):
    """Pop the pip options out of ``kw``, checked as 'ddpctl image build' checks them; None when none is
    given (the images package, with its Docker helpers, is then not imported: start-up of 'render')."""
    wheelhouse, index_url, ca_file = kw.pop("wheelhouse", None), kw.pop("index_url", None), kw.pop("ca_file", None)
    if wheelhouse is None and index_url is None and ca_file is None:
        return None
    from ddpctl.images.plans import build_plan
    from ddpctl.images.workspace import PipOptions

    build_plan(cpu=True, wheelhouse=wheelhouse, index_url=index_url, ca_file=ca_file)
    return PipOptions(wheelhouse, index_url, ca_file)


def refuse_unused(pip, requirements: str | None, *, flag: str, allow_credentials: bool = False) -> None:
    """pip's options, --requirements and --allow-credential-files only matter when a workspace image is built
    (``flag``: --push for render, --bake for up); given without it they would be silently ignored, so say so."""
    given = [name for name, value in (("--requirements", requirements), ("--wheelhouse", pip and pip.wheelhouse),
                                      ("--index-url", pip and pip.index_url), ("--ca-file", pip and pip.ca_file),
                                      ("--allow-credential-files", allow_credentials))
             if value]
    if given:
        from ddpctl.errors import UsageError

        what = ", ".join(given)
        raise UsageError(f"{what} only {'applies' if len(given) == 1 else 'apply'} to a workspace image, built with "
                         f"{flag}", f"add {flag}" + (" REGISTRY/NAME" if flag == "--push" else "")
                         + f" (with --workdir DIR), or drop {what}")


def absolute_code_paths(kw: dict[str, Any], building: bool) -> None:
    """With --push / --bake, --workdir and --requirements are read on this machine to build the image, never
    mounted: make them absolute against the current directory, so '../proj' works (host paths may not contain
    '..' only because Kubernetes refuses it in a hostPath, which a baked job never has)."""
    for key in ("workdir", "requirements"):
        if building and kw.get(key):
            kw[key] = os.path.abspath(os.path.expanduser(kw[key]))
