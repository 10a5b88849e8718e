"""The comma-separated lists of ``ddpctl bench``'s options (``--workloads a,b``, ``--gpus 1,2``), as tuples."""

from __future__ import annotations

from ddpctl.errors import UsageError


def parse_list(text: str | None, *, what: str) -> tuple[str, ...] | None:
    """``"a,b"`` -> ``("a", "b")``; None or empty -> None."""
    if text is None:
        return None
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    if not items:
        raise UsageError(f"{what} is empty", f"pass a comma-separated list, e.g. --{what} a,b")
    return items


def parse_counts(text: str | None, *, what: str = "gpus", example: str = "1,2") -> tuple[int, ...] | None:
    items = parse_list(text, what=what)
    if items is None:
        return None
    try:
        return tuple(int(x) for x in items)
    except ValueError:
        raise UsageError(f"--{what.replace('_', '-')} must be comma-separated integers, got {text!r}",
                         f"pass e.g. --{what.replace('_', '-')} {example}") from None

