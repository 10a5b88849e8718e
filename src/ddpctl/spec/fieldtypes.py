"""The entry types of the spec's field table (:mod:`ddpctl.spec.fields`): a :class:`Field` and its CLI
:class:`Flag`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ddpctl.spec.checks import Checker

Check = Callable[[Checker, tuple, Any], Any]


@dataclass(frozen=True)
class Flag:
    """The command-line flag that sets a field; :mod:`ddpctl.cli.spec_options` turns it into a Typer option.

    ``type`` is ``int``, ``float``, ``str``, ``bool`` or ``list`` (a repeatable string flag). ``commands`` names the
    commands that offer it (``up``, ``compose``, ``pytorchjob``, ``trainjob``, ``slurm``); None: every command
    that takes a spec. A flag of a section option (``kubernetes.*``, ``slurm.*``) is listed under "Target options".
    """

    decls: tuple[str, ...]
    type: type
    help: str
    param: str = ""  # the command function's parameter name; default: the key's last part
    commands: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Field:
    key: str  # "nodes", or "kubernetes.namespace" for a section option
    check: Check  # (checker, key path, raw value) -> model value, or a one-line SpecError
    flag: Flag | None = None
    dump: Callable[[Any], Any] | None = None  # model value -> plain data (spec_to_dict); default: tuple -> list
    # A valid value other than the default, and the other keys it needs: tests/unit/test_targets.py sets it on
    # every target and expects it honoured (the output changes) or refused with a reason.
    sample: Any = None
    needs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def sample_data(self) -> dict[str, Any]:
        """``needs`` plus this field at ``sample``, as spec data (a section option nested in its section)."""
        data = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.needs.items()}
        if self.section:
            data.setdefault(self.section, {})[self.key.split(".", 1)[1]] = self.sample
        else:
            data[self.key] = self.sample
        return data

    @property
    def param(self) -> str:
        return (self.flag.param if self.flag and self.flag.param else self.key.rsplit(".", 1)[-1])

    @property
    def section(self) -> str | None:
        return self.key.split(".", 1)[0] if "." in self.key else None


