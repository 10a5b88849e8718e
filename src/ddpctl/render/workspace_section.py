"""The ``workspace:`` section as every render target sees it (pure).

``ddpctl render TARGET --push REPO`` (:mod:`ddpctl.images.bake`) builds the image from ``workspace.dir`` and
``workspace.requirements`` and pushes it before rendering; the renderers then get ``workspace.repository`` with
the job image pinned by digest (:attr:`~ddpctl.spec.JobSpec.baked`), and no build inputs. They honour that (the
code's directory, /workspace, is the working directory, nothing is mounted) and refuse the rest with the way to
get there.
"""

from __future__ import annotations

from ddpctl.targets import Unsupported

SECTION = "workspace"
HONOURS = frozenset({"workspace.repository"})

_FIX = ("render through 'ddpctl render TARGET --workdir DIR --push REGISTRY/NAME' (or workspace.dir in the file), "
        "which builds, pushes and pins the image first")

UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported("workspace.repository without a pushed image", lambda s: bool(s.workspace.repository) and not s.baked,
                "the manifest can only name the code's image once it is built and pushed (by digest)", _FIX,
                fields=()),
    Unsupported("a code directory or requirements without --push (workspace.dir, workspace.requirements)", lambda s: bool(s.workspace.dir or s.workspace.requirements),
                "the code directory and its requirements are read when the image is built, not by a renderer", _FIX,
                fields=("workspace.dir", "workspace.requirements")),
)
