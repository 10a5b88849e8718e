"""``ddpctl.cli.main._build``: a call that names a command builds only that command (start-up time), and
what the user sees is the same as with every command built: the help of each command and group, root help,
errors for unknown names."""

from __future__ import annotations

import pytest
from typer.main import get_command

from ddpctl.cli.main import _build, _register, app, command_name, group_name, main

_register()
NAMES = [command_name(c) for c in app.registered_commands] + [group_name(g) for g in app.registered_groups]


def _full(args: list[str], capsys) -> tuple[str, str]:
    try:
        get_command(app).main(args=args, prog_name="ddpctl", standalone_mode=False)
    except SystemExit:
        pass
    return capsys.readouterr()


def _ours(args: list[str], capsys) -> tuple[str, str]:
    with pytest.raises(SystemExit):
        main(args)
    return capsys.readouterr()


def test_every_command_and_group_is_found():
    assert {"up", "ps", "logs", "down", "render", "image", "bench", "doctor", "validate"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_named_command_builds_only_itself(name):
    built = _build([name, "--help"])
    assert list(built.commands) == [name]
    assert len(app.registered_commands) + len(app.registered_groups) == len(NAMES)  # the app is left whole


@pytest.mark.parametrize("name", NAMES)
def test_its_help_is_the_same_as_with_every_command_built(name, capsys):
    assert _ours([name, "--help"], capsys).out == _full([name, "--help"], capsys).out


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["nosuch"], ["-x"]])
def test_root_options_and_unknown_names_build_everything(args):
    assert set(_build(args).commands) == set(NAMES)


def test_an_unknown_command_is_one_line_naming_it(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["nosuch"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "nosuch" in err
