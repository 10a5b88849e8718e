"""What every part of the executor shares: the label of ddpctl's containers, the caller's progress callback, an
exception's one-line reason."""

from __future__ import annotations

from typing import Callable

from ddpctl.launch import LABEL_MANAGED_BY, MANAGED_BY

MANAGED = f"{LABEL_MANAGED_BY}={MANAGED_BY}"

Say = Callable[[str], None]


def say_nothing(_: str) -> None:
    pass



def exc_reason(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or exc.__class__.__name__
    return " ".join(str(text).split())[:240]
