"""The ddp_train <-> ddpctl contract, from both sides (tests may import both packages; the packages never
import each other): every flag ``ddpctl bench`` gives ddp-train parses with ddp-train's own parser, the
summary line's JSON schema ships with ddp_train and names every key the bench report reads, and the report
reads the parameter count under the one spelling ddp-train emits. That a real summary validates against the
schema is tests/distributed/test_train_summary_schema.py."""

from __future__ import annotations

import itertools
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ddp_train.config.settings import parse_args
from ddpctl.bench import report
from ddpctl.bench.plan import PIPELINES, STRATEGIES, WORKLOADS, Cell
from ddpctl.bench.runner import CellRun, RunResult, ddp_train_args

REPO = Path(__file__).resolve().parents[2]


def summary_schema() -> dict:
    return json.loads((resources.files("ddp_train") / "summary.schema.json").read_text(encoding="utf-8"))


CELLS = [Cell(w, p, s, g, 64, 3, 7) for w, p, s, g in itertools.product(WORKLOADS, PIPELINES, STRATEGIES, (1, 2))]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_every_bench_flag_parses_with_ddp_trains_parser(cell, device):
    argv = ddp_train_args(cell, device, extra=("--seed", "3"))
    config = parse_args(argv)  # ddp-train's parser and its checks; a flag it does not know is a TrainError
    assert config.workload == WORKLOADS[cell.workload].train_workload
    assert config.strategy == cell.strategy and config.batch_size == cell.batch_size
    assert config.untimed_steps == cell.warmup and config.max_steps == cell.warmup + cell.steps
    assert config.no_eval and config.progress == "lines" and config.seed == 3
    assert (config.device == "cpu") == (device == "cpu")
    assert config.data_pipeline == cell.pipeline  # one name per pipeline: the bench's are ddp-train's


def test_bench_pipelines_are_ddp_trains_data_pipelines():
    from ddp_train.config.flags import build_parser

    choices = next(a.choices for a in build_parser()._actions if a.dest == "data_pipeline")
    assert set(PIPELINES) == set(choices) - {"auto"}


def test_summary_schema_is_package_data_and_a_valid_schema():
    schema = summary_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "params" in schema["required"] and schema["properties"]["event"] == {
        "const": "summary", "description": schema["properties"]["event"]["description"]}
    assert '"ddp_train" = ["*.json"]' in (REPO / "pyproject.toml").read_text()  # shipped in the wheel


def test_every_summary_key_the_report_reads_is_in_the_schema():
    source = (REPO / "src/ddpctl/bench/report.py").read_text()
    read = set(re.findall(r'_num\((?:r\.summary|last), "(\w+)"\)', source))
    read |= set(re.findall(r'r\.summary(?:\.get\(|\[)"(\w+)"', source))
    assert {"images_per_sec", "params", "global_batch"} <= read  # the scan finds the reads
    assert read <= set(summary_schema()["properties"]), read - set(summary_schema()["properties"])


def _entry(summary: dict) -> dict:
    cell = Cell("toy", "device", "ddp", 2, 32, 2, 4)
    full = {"event": "summary", "images_per_sec": 1000.0, "step_time_s": 0.064, "global_batch": 64, **summary}
    return report._cell_entry(cell, [CellRun(cell, 0, RunResult(0, "", "", 1.0), full)])


def test_report_reads_params_and_nothing_else():
    assert WORKLOADS["toy"].param_count is None
    assert _entry({"params": 24346})["param_count"] == 24346
    for guess in ("param_count", "num_params", "parameters", "model_params"):  # no spelling ddp-train emits
        assert _entry({guess: 24346})["param_count"] is None
    cifar = Cell("cifar10-resnet18", "device", "ddp", 2, 32, 2, 4)
    run = CellRun(cifar, 0, RunResult(0, "", "", 1.0), {"event": "summary", "images_per_sec": 1.0})
    assert report._cell_entry(cifar, [run])["param_count"] == WORKLOADS["cifar10-resnet18"].param_count
