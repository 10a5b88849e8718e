"""ddp-train's CPU scenario set gives the recorded results: summaries (without timing) and checkpoint bytes.

The record (tests/support/ddp_train_scenarios.json, made by tests/support/ddp_train_scenarios.py --record) is
what ddp-train computes; a change that should not alter behaviour keeps it byte for byte. A deliberate change of
results re-records it (`--record`, then read the diff)."""

from __future__ import annotations

import json
import os

import pytest

from ddp_train_scenarios import SCENARIOS, probe, run_scenarios

pytestmark = pytest.mark.distributed

RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "support", "ddp_train_scenarios.json")


@pytest.fixture(scope="module")
def record():
    with open(RECORD) as f:
        rec = json.load(f)
    if rec["probe"] != probe():
        pytest.skip(f"this machine's float results differ from the recording machine's ({rec['probe']})")
    return rec["scenarios"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_gives_the_recorded_results(name, record):
    assert run_scenarios([name])[name] == record[name]
