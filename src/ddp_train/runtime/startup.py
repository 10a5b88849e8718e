"""A process's start: torch's imports with Python's garbage collector paused.

Importing torch (and ``torch._dynamo``, which every optimizer step and every DDP construction import) creates
hundreds of thousands of long-lived objects and next to no garbage, yet the collector, which runs after every
few hundred new objects, walks that growing heap again and again: about a quarter of the import's CPU (0.5 s of
2.2 s per process on a 2-core machine; every rank and every agent pays it, again at each restart). The imports
run with the collector paused; then ``gc.freeze`` moves what they made out of its view, so the training loop's
collections do not walk torch's modules either. Nothing is lost: the collector runs again afterwards, and import
cycles are not garbage.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off, then freeze what survived and turn it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def import_modules(*names: str) -> None:
    """Import ``names`` (torch's heavy modules, ddp_train's own) with the collector paused."""
    with collector_paused():
        for name in names:
            importlib.import_module(name)
