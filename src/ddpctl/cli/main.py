"""The ``ddpctl`` command line: a thin Typer layer over the library. This module runs it; the root app lives
in :mod:`ddpctl.cli.app` (the leaf the command modules import) and :mod:`ddpctl.cli.commands` registers them.

stdout carries only artifacts (manifests, tables); messages go to stderr. Every error is one line
``error: <problem>; <fix>`` with exit code 2 for bad input and 1 for runtime failures.
"""

from __future__ import annotations

import os
import sys

import typer

from ddpctl.cli.app import app, err  # also re-exported: "from ddpctl.cli.main import app, err" keeps working
from ddpctl.errors import DdpctlError


def _register() -> None:
    """Attach the command groups. Each module imports only what its commands need at call time."""
    from ddpctl.cli import commands  # noqa: F401  (registers commands on `app`)


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
    except BrokenPipeError:  # stdout closed by its reader ('ddpctl logs ... | head'): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        sys.exit(141)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
