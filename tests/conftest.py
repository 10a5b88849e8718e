"""Every test run keeps the output of the jobs it ends (ddpctl.watch.history) in a directory of its own, never in
the user's state directory: XDG_STATE_HOME points into a temporary directory for the whole session (ddpctl
processes the tests start inherit it), removed when the session ends."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_STATE = tempfile.mkdtemp(prefix="ddpctl-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
