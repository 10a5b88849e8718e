"""The root Typer app and the stderr writer: the leaf every command module imports.

Command modules do ``from ddpctl.cli.app import app, err`` and register their commands on ``app``;
:mod:`ddpctl.cli.groups` imports them all and :mod:`ddpctl.cli.main` runs the result. Nothing here imports
a command module, so there is no import circle.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ddpctl import __version__

app = typer.Typer(
    name="ddpctl",
    help="Run PyTorch DDP jobs on one or many GPUs and nodes: build images, start a local cluster of "
    "containers, render compose / Kubeflow / Slurm manifests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ddpctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """ddpctl: one job spec for PyTorch DDP on Docker, docker-compose, Kubeflow and Slurm."""


def err(message: str) -> None:
    """Write one diagnostic line to stderr, its control characters shown as escapes: a line can carry text from
    elsewhere (a file name, a job file's key, what a job printed) that must not act on the terminal."""
    from ddpctl.joboutput.visible import visible

    print(visible(message, tab=True), file=sys.stderr, flush=True)
