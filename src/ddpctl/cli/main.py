"""The ``ddpctl`` command line: a thin Typer layer over the library.

stdout carries only artifacts (manifests, tables); messages go to stderr. Every error is one line
``error: <problem>; <fix>`` with exit code 2 for bad input and 1 for runtime failures.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from ddpctl import __version__
from ddpctl.errors import DdpctlError

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


def _register() -> None:
    """Attach the command groups. Each module imports only what its commands need at call time."""
    from ddpctl.cli import commands  # noqa: F401  (registers commands on `app`)


def err(message: str) -> None:
    """Write one diagnostic line to stderr."""
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point with one-line errors and meaningful exit codes."""
    from typer._click import exceptions as cx
    from typer.main import get_command

    _register()
    command = get_command(app)
    from ddpctl.cli.fastparams import install

    install()  # plain options skip Typer's pydantic adapters (start-up time)
    debug = os.environ.get("DDPCTL_DEBUG") == "1"
    try:
        code = command.main(args=argv, prog_name="ddpctl", standalone_mode=False)
    except DdpctlError as exc:
        if debug:
            raise
        err(f"error: {exc.message}")
        sys.exit(exc.exit_code)
    except cx.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else "", file=sys.stdout)
        sys.exit(0)
    except cx.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "ddpctl"
        message = " ".join(exc.format_message().splitlines())  # a value with a line break stays on one line
        err(f"error: {message.rstrip('.')}; see '{where} --help'")
        sys.exit(2)
    except cx.ClickException as exc:
        err("error: " + " ".join(exc.format_message().splitlines()))
        sys.exit(exc.exit_code)
    except typer.Abort:
        err("error: aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err("error: interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
