"""The flags of a workspace image (``render --push``, ``up --bake``): where its requirements come from, the same
flags as ``ddpctl image build``; their rules are :mod:`ddpctl.api.workspace_rules`."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Optional

import typer

Wheelhouse = Annotated[Optional[Path], typer.Option(
    "--wheelhouse", show_default=False, help="With --push (render) / --bake (up): directory of wheels pip installs "
    "the requirements from (offline).")]
IndexUrl = Annotated[Optional[str], typer.Option(
    "--index-url", show_default=False, help="With --push (render) / --bake (up): package index (mirror) for the "
    "requirements.")]
CaFile = Annotated[Optional[Path], typer.Option(
    "--ca-file", show_default=False, help="With --index-url: CA bundle (PEM) for it.")]
AllowCredentials = Annotated[bool, typer.Option(
    "--allow-credential-files", help="Let files that look like credentials (.env, private keys, .netrc, "
    ".ssh/, cloud and Docker credential files) in the code directory go into the image; by default they are "
    "refused unless DIR/.dockerignore leaves them out.")]


def workspace_params() -> list[inspect.Parameter]:
    """pip's sources for the requirements of a workspace image (render --push, up --bake)."""
    return [*(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=None)
              for n, a in (("wheelhouse", Wheelhouse), ("index_url", IndexUrl), ("ca_file", CaFile))),
            inspect.Parameter("allow_credential_files", inspect.Parameter.KEYWORD_ONLY, annotation=AllowCredentials,
                              default=False)]
