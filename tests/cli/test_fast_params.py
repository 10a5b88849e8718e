"""``ddpctl.cli.fast_params`` against Typer's own coercion, through the real CLI in subprocesses.

fastparams replaces Typer's pydantic-based coercion of plain ``str``/``int``/``float``/``bool``/``Path``
parameters (private Typer internals, hence ``typer<0.30`` in pyproject.toml). Every case runs twice, with
the patch and with ``install`` made a no-op (Typer's own path, what an unsupported Typer version gets): exit
code and stdout must be the same (the same values reach the commands), and so must stderr, except that a bad
value's reason is worded by Click with the patch ("'abc' is not a valid integer") and by pydantic without it
("Input should be a valid integer, ..."): the same one-line error naming the option, exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

BAD = {"bad-int", "float-for-int", "empty-int", "bad-float", "bad-optional-float"}
CASES = {
    "version": ["--version"],
    "help": ["--help"],
    "render-help": ["render", "compose", "--help"],
    "bench-help": ["bench", "--help"],
    "ints-lists-str": ["render", "compose", "-n", "2", "-g", "0", "--port", "29501", "-e", "A=1", "-e", "B=2",
                       "--max-restarts", "3", "--name", "fp"],
    "shm-bool": ["render", "pytorchjob", "-n", "3", "--shm-size", "2g", "--validate"],
    "file-and-command": ["render", "slurm", "-f", "examples/single-node-2gpu.yaml", "--", "python", "t.py", "-x", "1"],
    "bad-int": ["render", "compose", "-g", "abc"],  # not -n: --nodes is a string (a count or MIN:MAX)
    "float-for-int": ["render", "compose", "--port", "1.5"],
    "empty-int": ["render", "compose", "-g", ""],
    "bad-float": ["bench", "--cell-timeout", "abc"],
    "bad-optional-float": ["bench", "--time-budget", "1e"],
    "unknown-option": ["ps", "--bogus"],
}


def run(argv: list[str], patched: bool) -> tuple[int, str, str]:
    pre = "" if patched else "import ddpctl.cli.fast_params as f; f.install = lambda: None; "
    code = f"{pre}import sys; sys.argv = ['ddpctl', *{argv!r}]; from ddpctl.cli.main import main; main()"
    env = {k: v for k, v in os.environ.items() if k != "DDPCTL_DEBUG"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=120)
    return res.returncode, res.stdout, res.stderr


@pytest.mark.parametrize("argv", list(CASES.values()), ids=list(CASES))
def test_same_values_and_errors_without_the_patch(argv):
    fast, typer_own = run(argv, True), run(argv, False)
    assert "Traceback" not in fast[2] + typer_own[2]
    if argv not in [CASES[k] for k in BAD]:
        assert fast == typer_own
        return
    assert fast[:2] == typer_own[:2] == (2, "")
    for err in (fast[2], typer_own[2]):
        assert err.count("\n") == 1 and err.startswith("error: Invalid value for '")
    head = fast[2].split(": ")[:2]  # "error", "Invalid value for '--gpus-per-node' / '-g'"
    assert typer_own[2].split(": ")[:2] == head
    assert fast[2].rsplit(";", 1)[1] == typer_own[2].rsplit(";", 1)[1]  # " see 'ddpctl ... --help'"


def test_bad_values_are_usage_errors():
    code, out, err = run(CASES["bad-int"], True)
    assert code == 2 and out == ""
    assert err.startswith("error: Invalid value for '--gpus-per-node' / '-g': 'abc' is not a valid integer; "
                          "see 'ddpctl render compose --help'")


def test_the_patch_is_active_on_the_installed_typer():
    """On the pinned Typer the internals fastparams hooks exist (a Typer bump that moves them fails here)."""
    from typer.core import _TyperParameter

    from ddpctl.cli import fast_params

    assert fast_params._runtime_param_class() is not None
    fast_params.install()
    assert getattr(_TyperParameter, "_ddpctl_fast", False)
