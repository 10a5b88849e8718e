"""Where a spec key stands in its source file, for error messages ("'nccl.debug' (job.yaml:7)")."""

from __future__ import annotations


class Lines:
    """Maps a key path (("nccl", "debug")) to its line in the source file."""

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        self.lines: dict[tuple[str, ...], int] = {}

    def where(self, path: tuple[str, ...], shown: tuple[str, ...] | None = None) -> str:
        """``path`` (or ``shown`` in its place, e.g. without a key that may hold a value) and its line."""
        key = ".".join(path if shown is None else shown)
        key = key.encode("unicode_escape").decode("ascii")  # a key with a line break stays one line
        line = self.lines.get(path)
        if self.source and line:
            return f"'{key}' ({self.source}:{line})"
        return f"'{key}'"
