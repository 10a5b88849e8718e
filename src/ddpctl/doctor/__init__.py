"""``ddpctl doctor``: check that this machine has what a target needs, and say how to fix what it lacks.

Plan -> executor: :func:`plan` lists the checks a target needs (pure); :func:`run` evaluates them against a
:class:`Probes` object, the only place with side effects (processes, sockets, files, the Docker Engine).
Tests inject their own probes or run the real ones against real engines; every check function is pure
given its probe results.

Each check gives one :class:`Check`: ``ok``, ``warn`` or ``fail``, what was found, and for warn/fail the fix.
"""

from __future__ import annotations

# The public API (cli/doctor.py and the tests use these); each check function lives in its role's module.
from ddpctl.doctor.model import CONTAINERS, CRDS, HOOK, STACK_MIN, TARGETS, Check, Options, ProbeError, Probes  # noqa: F401
from ddpctl.doctor.plan import CHECKS, failed, plan, run, to_json  # noqa: F401
from ddpctl.doctor.probes import host_probes  # noqa: F401
