"""The ``ddpctl`` command line: a thin Typer layer over the library. This module runs it; the root app lives
in :mod:`ddpctl.cli.app` (the leaf the command modules import) and :mod:`ddpctl.cli.groups` registers them.

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
    from ddpctl.cli import groups  # noqa: F401  (registers the command groups on `app`)


def command_name(info) -> str:
    """The name a registered command is called by (Typer's rule: its function's name, '_' -> '-')."""
    from typer.main import get_command_name

    return info.name or get_command_name(info.callback.__name__)


def group_name(info) -> str | None:
    """The name of a registered group (given to add_typer, or the sub-app's own ``name``)."""
    name = info.name if isinstance(info.name, str) else None
    if name is None and info.typer_instance is not None:
        name = info.typer_instance.info.name
    return name if isinstance(name, str) else None


def _build(argv: list[str]):
    """The click command for this call. Typer turns every registered function into a click command before it
    runs one (type hints, parameters: about a third of the start-up time); when the first argument names a
    command or group, only that one is built. Anything else (no argument, a root option, an unknown name)
    builds all, so root help, --version and "No such command" read as before."""
    from typer.main import get_command

    first = argv[0] if argv else ""
    commands = [c for c in app.registered_commands if command_name(c) == first]
    groups = [g for g in app.registered_groups if group_name(g) == first]
    if first.startswith("-") or not (commands or groups):
        return get_command(app)
    every = app.registered_commands, app.registered_groups
    app.registered_commands, app.registered_groups = commands, groups
    try:
        return get_command(app)
    finally:
        app.registered_commands, app.registered_groups = every


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point with one-line errors and meaningful exit codes."""
    from typer._click import exceptions as cx

    _register()
    command = _build(sys.argv[1:] if argv is None else argv)
    from ddpctl.cli.fast_params import install

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
