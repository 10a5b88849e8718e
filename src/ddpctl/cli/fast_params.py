"""Fast coercion of plain CLI parameters (keeps ``ddpctl render ...`` start-up well under 0.3 s).

Typer >= 0.27 coerces every parameter of the invoked command (and of its parent groups, e.g. ``--version``)
through a pydantic ``TypeAdapter``; importing pydantic and building the adapters costs more than a whole
render on a 2-core machine. ddpctl's options are plain ``str``/``int``/``float``/``bool``/``Path`` values (or
lists of them), for which a direct conversion gives the same values, and for a bad value the same one-line
usage error (exit 2) with Click's wording of the reason ("'abc' is not a valid integer") where Typer's path
words it as pydantic does. :func:`install` gives such parameters that conversion; anything else keeps Typer's
own path. On a Typer without this internal API it does nothing (correct, only slower); pyproject.toml pins
``typer<0.30`` (tested on 0.29) and tests/cli/test_fast_params.py compares both paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_PLAIN = (str, int, float, bool, Path)


def _runtime_param_class() -> type | None:
    try:
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover - other Typer versions
        return None

    def convert(value: Any, ann: Any, param: Any, ctx: Any) -> Any:
        if ann is bool or isinstance(value, ann):
            return value
        try:
            return ann(value)
        except (TypeError, ValueError):
            kind = {int: "integer", float: "float"}.get(ann, ann.__name__)
            raise BadParameter(f"'{value}' is not a valid {kind}.", ctx=ctx, param=param) from None

    class PlainRuntimeParam(RuntimeParam):  # type: ignore[misc, valid-type]
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ann = self.annotation
            if getattr(ann, "__origin__", None) is list:
                (item,) = ann.__args__
                return [convert(v, item, param, ctx) for v in value]
            return convert(value, ann, param, ctx)

    return PlainRuntimeParam


def install() -> None:
    """Make Typer give plain parameters the direct conversion (idempotent; ddpctl's process only).

    Wraps ``_TyperParameter.get_runtime_param``, the lazy hook Typer uses for every parameter, including the
    ``--help`` and ``--version`` options it creates per context.
    """
    plain = _runtime_param_class()
    try:
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - other Typer versions
        return
    if plain is None or getattr(_TyperParameter, "_ddpctl_fast", False):
        return
    original = _TyperParameter.get_runtime_param

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            desc = self.type_descriptor
            ann = desc.annotation
            inner = ann.__args__[0] if getattr(ann, "__origin__", None) is list else ann
            if inner in _PLAIN and desc.file_annotation is None:
                self._runtime_param = plain(parameter_info=desc.parameter_info, annotation=ann)
        return original(self)

    _TyperParameter.get_runtime_param = get_runtime_param
    _TyperParameter._ddpctl_fast = True
