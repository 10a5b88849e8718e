"""ddp_train.runtime.startup: torch's imports run with the garbage collector paused, then what they made is frozen."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from ddp_train.runtime import startup


@pytest.fixture(autouse=True)
def _collector_state():
    was = gc.isenabled()
    yield
    gc.unfreeze()  # back into the collector's view: this test process is not a ddp-train rank
    (gc.enable if was else gc.disable)()


def test_the_block_runs_with_the_collector_off_and_it_is_back_on_after():
    gc.enable()
    gc.unfreeze()
    with startup.collector_paused():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)  # what the block made left the collector's view


def test_an_error_in_the_block_turns_it_back_on_and_a_disabled_collector_stays_off():
    gc.enable()
    with pytest.raises(RuntimeError), startup.collector_paused():
        raise RuntimeError("import failed")
    assert gc.isenabled()
    gc.disable()
    with startup.collector_paused():
        pass
    assert not gc.isenabled()


def test_a_ddp_train_process_imports_torch_with_the_collector_paused():
    """In a fresh interpreter: import_modules imports what it is given, and no collection runs meanwhile."""
    code = (
        "import gc, sys\n"
        "from ddp_train.runtime.startup import import_modules\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: runs.append(phase))\n"
        "import_modules('argparse', 'ddp_train.config.flags')\n"
        "assert 'ddp_train.config.flags' in sys.modules and gc.isenabled()\n"
        "print(len(runs), gc.get_freeze_count() > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["0", "True"], out
