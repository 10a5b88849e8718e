"""Every record a job prints is checked before ddpctl uses a value of it (ddpctl.joboutput.record_check): the
bundled schema copies equal ddp_train's, the bounds hold (finite, sizes, depth, number length), the compiled
check agrees with ddpctl's validator and with jsonschema, and a record that fails is a counted plain line."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddpctl import schemas
from ddpctl.joboutput import record_check, records
from job_records import summary, summary_line

GOOD = {"event": "progress", "version": 1, "time": 1.7e9, "step": 10, "total": 100, "rank": 1, "world_size": 2,
        "restart": 0, "loss": 0.5, "samples_per_sec": 10.0, "host": "h", "node": 0,
        "checkpoint": {"step": 5, "path": "/c/5.pt"}}


@pytest.mark.parametrize("event", ["progress", "summary"])
def test_the_bundled_schemas_are_copies_of_ddp_trains(event):
    name = schemas.RECORD_FILES[event]
    assert schemas.read_text(name) == (resources.files("ddp_train") / name).read_text(encoding="utf-8")


def test_a_good_record_and_summary_pass_and_integer_floats_become_ints():
    assert record_check.check(json.dumps(GOOD)) == ("progress", GOOD)
    assert record_check.check(summary_line()) == ("summary", summary())
    event, rec = record_check.check(json.dumps({**GOOD, "step": 10.0, "checkpoint": {"step": 5.0, "path": None}}))
    assert type(rec["step"]) is int and type(rec["checkpoint"]["step"]) is int


@pytest.mark.parametrize("text, why", [
    ('{"event": "progress", "step": NaN}', "NaN is not a JSON number"),
    ('{"event": "progress", "loss": -Infinity}', "-Infinity is not a JSON number"),
    ('{"event": "progress", "step": ' + "9" * 400 + "}", "beyond 2**53"),
    ('{"event": "progress", "step": ' + "9" * 60_000 + "}", "not valid JSON"),  # past Python's 4300 digits
    ('{"event": "progress", "loss": 0.' + "1" * 40 + "}", "more than 32 characters"),
    ('{"event": "progress", "loss": 1e400}', "out of range"),
    (json.dumps({**GOOD, "loss": 1e300}), "out of range"),
    (json.dumps({**GOOD, "step": 2**60}), "beyond 2**53"),
    (json.dumps({**GOOD, "host": "h" * 5000}), "a string of more than 4096"),
    (json.dumps({**GOOD, "x": [[[[[[[[[1]]]]]]]]]}), "nested more than 8 deep"),
    (json.dumps({**GOOD, "x": list(range(5000))}), "more than 4096 values"),
    (json.dumps({**GOOD, "restart": "1"}), "restart must be integer, got string"),
    (json.dumps({**GOOD, "step": -50}), "step must be at least 0"),
    (json.dumps({**GOOD, "step": True}), "step must be integer, got boolean"),
    (json.dumps({**GOOD, "checkpoint": {"step": 1}}), "checkpoint.path is required"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "rank"}), "rank is required"),
    (summary_line().replace('"pass"', '"\\u001b[2J"'), "sync_check must be one of"),
    ('{"event": "progress", "step": 1', "not valid JSON"),
    ('{"event": "summary"' + "[" * 100_000, "not valid JSON"),
])
def test_what_fails_is_rejected_with_a_short_reason(text, why):
    found = record_check.check(text)
    assert isinstance(found, record_check.Rejected) and why in found and len(found) <= 120


@pytest.mark.parametrize("text", ["hello", "[1]", '{"msg": "progress"}', '{"event": "epoch", "x": "progress"}',
                                  '{"progress": 1', "rank-0 | x"])
def test_other_lines_are_plain_output(text):
    assert record_check.check(text) is None


def test_a_rejected_record_is_a_counted_plain_line_never_a_value():
    lines = ["rank-0 | " + json.dumps(GOOD), "rank-1 | " + json.dumps({**GOOD, "rank": 1, "restart": "x"}),
             '{"event": "summary", "steps": 3}', "plain"]
    found = records.collect_all(lines)
    assert list(found.ranks) == [1] and found.summary is None and found.rejected == 2
    assert "2 line(s) looked like progress records" in found.note() and "restart" in found.note()
    assert not records.is_record(lines[1]) and records.is_record(lines[0])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
fields = st.sampled_from(sorted(record_check._schema("progress")["properties"]))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(changes=st.dictionaries(fields, json_values, max_size=4), drop=st.lists(fields, max_size=2))
def test_the_compiled_check_agrees_with_jsonschema_on_random_records(changes, drop):
    obj = {**GOOD, **changes}
    for key in drop:
        obj.pop(key, None)
    obj["event"] = "progress"
    text = json.dumps(obj)
    found = record_check.check(text)
    bounded = record_check._bounded(json.loads(text)) is None
    reference = jsonschema.Draft202012Validator(record_check._schema("progress")).is_valid(json.loads(text))
    assert isinstance(found, tuple) == (reference and bounded)
    if bounded:  # ddpctl's own validator says the same
        assert (record_check._slow("progress")(json.loads(text)) is None) == reference
