"""Job-spec flags shared by every command that takes a spec (``render *``, ``up``).

The flags are not declared here: each comes from its field's :class:`~ddpctl.spec.fields.Flag` in the spec's
field table, so a new field with a flag reaches ``render *`` and ``up`` without touching the CLI. A command builds
its parameters with :func:`spec_params` and turns the values back into a spec with :func:`spec_from_cli`; flags
override the YAML file key of the same name (:mod:`ddpctl.spec.merge`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ddpctl.spec import JobSpec, load_spec
from ddpctl.spec.fields import Field, flags

SPEC_PANEL = "Job spec (flags override the -f file)"
TARGET_PANEL = "Target options"

JobFile = Annotated[
    Optional[Path],
    typer.Option("-f", "--file", help="Job spec YAML file.", rich_help_panel=SPEC_PANEL, show_default=False),
]
Command = Annotated[Optional[list[str]], typer.Argument(
    help="Command to run in every process after '--' (default: ddp-train).", show_default=False)]

_TYPES: dict[type, Any] = {int: int, float: float, str: str, bool: bool, list: list[str]}


def annotation(f: Field) -> Any:
    """The Typer parameter type of a field's flag (always optional: None means 'not given')."""
    assert f.flag is not None
    return Annotated[Optional[_TYPES[f.flag.type]], typer.Option(
        *f.flag.decls, help=f.flag.help, rich_help_panel=TARGET_PANEL if f.section else SPEC_PANEL,
        show_default=False)]


def spec_params(command: str) -> list[inspect.Parameter]:
    """``-f`` and the flag of every field that ``command`` offers, as keyword-only parameters (default None)."""
    params = [inspect.Parameter("file", inspect.Parameter.KEYWORD_ONLY, annotation=JobFile, default=None)]
    params += [inspect.Parameter(f.param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(f), default=None)
               for f in flags(command)]
    return params


def command_params(command: str, own: list[inspect.Parameter]) -> inspect.Signature:
    """A spec command's signature: the spec flags, then the command's ``own`` options, then the command words."""
    return inspect.Signature(spec_params(command) + own + [
        inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, annotation=Command, default=None)])


def install(fn: Any, signature: inspect.Signature) -> Any:
    """Give ``fn(**kw)`` the signature Typer reads its options from."""
    fn.__signature__ = signature
    fn.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return fn


def spec_from_cli(command_name: str, kw: dict[str, Any]) -> JobSpec:
    """Pop ``command_name``'s spec parameters (and ``file``, ``command``) out of ``kw``, merge them over the file
    and validate once (same rules and messages for both)."""
    file = kw.pop("file", None)
    words = kw.pop("command", None)
    overrides: dict[str, Any] = {}
    for f in flags(command_name):
        value = kw.pop(f.param, None)
        if f.flag is not None and f.flag.type is list:
            value = list(value) if value else None
        overrides[f.key] = value
    overrides["command"] = list(words) if words else None
    return load_spec(file, overrides)
