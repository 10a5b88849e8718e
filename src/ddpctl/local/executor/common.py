"""What every part of the executor shares: job labels, the caller's progress callback, log-line splitting."""

from __future__ import annotations

from typing import Callable, Iterator

from ddpctl.launch import LABEL_JOB, LABEL_MANAGED_BY, MANAGED_BY

MANAGED = f"{LABEL_MANAGED_BY}={MANAGED_BY}"

Say = Callable[[str], None]


def say_nothing(_: str) -> None:
    pass


def job_label(job: str) -> str:
    return f"{LABEL_JOB}={job}"

def exc_reason(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or exc.__class__.__name__
    return " ".join(str(text).split())[:240]


def split_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    buf = b""
    for chunk in chunks:
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode("utf-8", "replace").rstrip("\r")
    if buf:
        yield buf.decode("utf-8", "replace").rstrip("\r")

