"""One error family for ddpctl. Every message names the problem and ends with the fix.

The CLI catches :class:`DdpctlError`, prints ``error: <message>`` as one line on stderr and exits
with :attr:`DdpctlError.exit_code` (2 for bad input, 1 for runtime failures).
"""

from __future__ import annotations

import re

_PASSWORD = re.compile(r"((?:^|[\s'\"(/])[^\s/@:'\"(]*):[^\s/@'\"]+@")


class DdpctlError(Exception):
    """Base class. ``problem`` says what is wrong, ``fix`` what to do about it."""

    exit_code = 1

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem.strip()
        self.fix = fix.strip()
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.problem if not self.fix else f"{self.problem}; {self.fix}"
        # Never a password: 'user:password@host' (in a URL or not) is shown as 'user:***@host'.
        text = _PASSWORD.sub(r"\1:***@", text)
        # One line, always: a value with a line break (\n, \r, U+0085, U+2028, ...) must not break the format.
        return " ".join(text.splitlines())


class BadInput(DdpctlError):
    """Bad input (a job spec, an argument, a path, an option): nothing was started or written. The CLI exits 2;
    the Python API (``import ddpctl``) raises it with the same one-line message and fix."""

    exit_code = 2


class SpecError(BadInput):
    """The job spec (file or flags) is invalid."""

    exit_code = 2


class UnsupportedFeature(BadInput):
    """A target cannot honour a spec feature."""

    exit_code = 2

    def __init__(self, target: str, feature: str, reason: str, fix: str = "") -> None:
        self.target = target
        self.feature = feature
        super().__init__(f"{target} does not support {feature}: {reason}", fix)


class UsageError(BadInput):
    """Bad command-line usage that is not about the spec itself (missing file, bad path)."""

    exit_code = 2


class EngineError(DdpctlError):
    """The container engine (Docker) failed or is unreachable."""

    exit_code = 1


class JobFailed(DdpctlError):
    """A running job ended with a failure (a node exited non-zero)."""

    exit_code = 1
