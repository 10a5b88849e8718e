"""A real ddp-train summary line validates against the schema ddp_train ships (src/ddp_train/summary.schema.json):
2 processes under torchrun on gloo (CPU), started with exactly the flags ``ddpctl bench`` gives a cell."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from ddp_helpers import ok, summary, torchrun
from ddpctl.bench import report
from ddpctl.bench.plan import Cell
from ddpctl.bench.runner import CellRun, RunResult, ddp_train_args

pytestmark = pytest.mark.distributed


def test_real_summary_validates_and_the_report_reads_its_params():
    schema = json.loads((resources.files("ddp_train") / "summary.schema.json").read_text(encoding="utf-8"))
    cell = Cell("toy", "device", "ddp", 2, 32, 2, 4)
    (proc,) = torchrun(2, ddp_train_args(cell, "cpu"))
    s = summary(ok(proc))
    jsonschema.Draft202012Validator(schema).validate(s)
    assert s["world_size"] == 2 and s["backend"] == "gloo" and s["launch"] == "torchrun"
    assert s["params"] > 0 and s["timed_steps"] == cell.steps
    run = RunResult(proc.returncode, proc.stdout, proc.stderr, 1.0)
    entry = report._cell_entry(cell, [CellRun(cell, 0, run, s)])
    assert entry["param_count"] == s["params"]  # the toy workload has no fallback count: this is the summary's

    broken = {k: v for k, v in s.items() if k != "params"}
    with pytest.raises(jsonschema.ValidationError, match="'params' is a required property"):
        jsonschema.Draft202012Validator(schema).validate(broken)
