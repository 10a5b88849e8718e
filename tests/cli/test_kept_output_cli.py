"""Flags and files bounded: --interval, --since, --tail, bench compare's reports, a kept folder's bad meta.json.
Each bad value is one line on stderr and exit 2, before any engine is asked (none can be reached here)."""

import json
import os
import subprocess
import sys

import pytest


def run(*args, env=None, cwd=None):
    code = "import sys\nfrom ddpctl.cli.main import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def one_line_exit_2(proc, needle):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/no-engine.sock"}
DIGITS = "9" * 400


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e-300", "-1", "0", "1e6"])
def test_status_interval_is_finite_and_above_a_floor(value):
    proc = run("status", "job", "--watch", "--interval", value, env={**os.environ, **NO_ENGINE})
    one_line_exit_2(proc, "--interval must be a number of seconds from 0.1 to 86400")


@pytest.mark.parametrize("args, needle", [
    (["--since", DIGITS], "is not a duration such as 30s"),
    (["--since", DIGITS + "s"], "is not a duration such as 30s"),
    (["--since", "99999999999d"], "more than 100 years back"),
    (["--since", "99999999999"], "is a Unix time after 2100"),
    (["--tail", DIGITS], "--tail must be a whole number from 0 to 10,000,000, got a number of about 400 digits"),
    (["--node", DIGITS], "--node must be a whole number from 0 to 100,000"),
])
def test_logs_since_and_tail_are_bounded(args, needle):
    one_line_exit_2(run("logs", "job", *args, env={**os.environ, **NO_ENGINE}), needle)


def test_the_python_api_bounds_the_same_values():
    from ddpctl.api.job_output import check_count, since_time
    from ddpctl.errors import UsageError

    for value in (float("nan"), float("inf"), -1.0, DIGITS, 10**400):
        with pytest.raises(UsageError):
            since_time(value)
    for what, value in (("tail=", 10**400), ("node=", -1), ("tail=", 1.5), ("tail=", True)):
        with pytest.raises(UsageError):
            check_count(what, value)
    assert since_time("10m") > 0 and check_count("tail=", 0) is None


@pytest.mark.parametrize("content, needle", [
    (b"{not json", "as JSON (JSONDecodeError)"),
    (b'{"schema_version": NaN}', "as JSON (ValueError)"),
    (b"[" * 100000, "as JSON"),
    (b'"a string"', "is not a ddpctl bench report"),
    (b"\xff\xfe", "as JSON (UnicodeDecodeError)"),
])
def test_bench_compare_refuses_malformed_reports(tmp_path, content, needle):
    (tmp_path / "a.json").write_bytes(content)
    one_line_exit_2(run("bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")), needle)


def test_bench_compare_validates_against_the_schema_before_reading(tmp_path):
    from ddpctl.bench.report import SCHEMA_VERSION

    bad = {"schema_version": SCHEMA_VERSION, "cells": [{"key": 5, "ok": "yes"}]}
    (tmp_path / "a.json").write_text(json.dumps(bad))
    one_line_exit_2(run("bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")),
                    "is not a valid bench report: ")


def test_bench_compare_refuses_a_report_over_the_size_limit_unread(tmp_path):
    from ddpctl.bench.compare import MAX_REPORT_BYTES

    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_REPORT_BYTES + 1)  # sparse: the size is what counts
    one_line_exit_2(run("bench", "compare", str(big), str(big)), "too large for a bench report")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    one_line_exit_2(run("bench", "compare", str(fifo), str(fifo)), "is not a regular file")


@pytest.mark.parametrize("meta", [
    {"job": "bad", "result": "failed", "ended": "yesterday", "duration_s": "long", "final_samples_per_sec": "fast",
     "nodes": [1], "exit_codes": {"0": "x"}, "hosts": 5, "world_size": "2", "tensorboard": {"dir": 1}},
    "not an object",
])
def test_status_reads_a_kept_folder_with_a_bad_meta_json(tmp_path, meta):
    folder = tmp_path / "ddpctl" / "jobs" / "bad"
    (folder / "attempt-0").mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "attempt-0" / "node-0.log").write_text("2026-01-01T00:00:00.0Z hello\n")
    (folder / "summary.json").write_text('{"images_per_sec": "fast"')
    env = {**os.environ, **NO_ENGINE, "XDG_STATE_HOME": str(tmp_path)}
    for args in (["status", "bad"], ["status", "bad", "--json"]):
        proc = run(*args, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        if isinstance(meta, dict):
            assert proc.returncode == 0 and "bad" in proc.stdout, proc.stderr


@pytest.mark.parametrize("kind", ["link", "dangling link", "directory"])
def test_plot_output_follows_the_o_rules_before_any_job_is_read(tmp_path, kind):
    victim = tmp_path / "victim.png"
    victim.write_text("untouched")
    out = tmp_path / "progress.png"
    if kind == "link":
        out.symlink_to(victim)
    elif kind == "dangling link":
        out.symlink_to(tmp_path / "nowhere.png")
    else:
        out.mkdir()
    proc = run("plot", "no-such-job", "-o", str(out), env={**os.environ, **NO_ENGINE})
    one_line_exit_2(proc, "not a regular file")
    assert victim.read_text() == "untouched" and not (tmp_path / "nowhere.png").exists()
