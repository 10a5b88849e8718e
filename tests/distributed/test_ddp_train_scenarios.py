"""ddp-train's CPU scenario set gives the recorded results: summaries (without timing) and checkpoint bytes.

The record (tests/support/ddp_train_scenarios.json, made by tests/support/ddp_train_scenarios.py --record) is
what ddp-train computes, one entry per machine whose float results differ (a fingerprint of a conv, BN and
linear step on one thread tells them apart); a change that should not alter behaviour keeps it byte for byte.
A deliberate change of results re-records it (`--record`, then read the diff); a new machine's entry is recorded
at a commit known to be good."""

from __future__ import annotations

import json
import os

import pytest

from ddp_train_scenarios import SCENARIOS, probe, record_for, run_scenarios
from itest_helpers import missing_part

pytestmark = pytest.mark.distributed

RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "support", "ddp_train_scenarios.json")


@pytest.fixture(scope="module")
def record():
    with open(RECORD) as f:
        rec = record_for(json.load(f), here := probe())
    if rec is None:  # skipped on a developer's machine, a failure where the suite must run everything (make test)
        missing_part(f"no record of this machine's float results ({here}): make one with "
                     "'tests/support/ddp_train_scenarios.py --record tests/support/ddp_train_scenarios.json' at a "
                     "commit known to be good")
    return rec


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_gives_the_recorded_results(name, record):
    assert run_scenarios([name])[name] == record[name]
