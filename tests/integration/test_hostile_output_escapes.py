"""A real job (Docker Engine, CPU image) prints terminal escapes: in a progress record's text fields (host,
checkpoint path), in plain lines, and a record that fails its schema (a text ``restart``, a 400-digit step).
``status`` (text and --json), ``ps`` and ``logs`` (not a terminal) show the escapes made visible, the forged
records count as plain lines and never as values, and ``logs --raw`` gives the bytes the job printed."""

from __future__ import annotations

import json
import os
import subprocess
import time

from attached import OnPty
from ddpctl.joboutput.visible import has_control
from itest_helpers import DDPCTL, ddpctl

SCRIPT = r'''
import json, sys, time
rec = {"event": "progress", "version": 1, "time": time.time(), "step": 3, "total": 12, "rank": 0,
       "world_size": 1, "restart": 0, "node": 0, "host": "evil\x1b]0;owned\x07host", "samples_per_sec": 5.0,
       "checkpoint": {"step": 2, "path": "/c/\x1b[2J\x1b]52;c;aGk=\x07ck"}}
print(json.dumps(rec))
print(json.dumps({**rec, "restart": "one", "step": 11}))
print('{"event": "progress", "step": ' + "9" * 400 + '}')
print("plain \x1b[31mred\x1b[0m and \x1b]52;c;aGk=\x07 and \u202eevil")
sys.stdout.flush()
time.sleep(600)
'''


def _wait_for(job: str, needle: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run([DDPCTL, "logs", job, "--raw"], capture_output=True, env=dict(os.environ, NO_COLOR="1"),
                             timeout=60).stdout
        if needle.encode() in out:
            return out.decode()
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {needle!r} in the job's output")


def test_escapes_a_job_prints_are_shown_as_text_and_logs_raw_gives_the_bytes(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "escapes.py").write_text(SCRIPT)
    ddpctl("up", "--name", job_name, "--image", cpu_image, "--workdir", ".", "-d", "--", "python", "escapes.py",
           cwd=tmp_path, check=True)
    raw = _wait_for(job_name, "evil")
    # --raw: the bytes as the job printed them, escapes included
    assert "plain \x1b[31mred\x1b[0m and \x1b]52;c;aGk=\x07 and \u202eevil" in raw

    logs = ddpctl("logs", job_name, check=True)
    assert "plain \\x1b[31mred\\x1b[0m and \\x1b]52;c;aGk=\\x07 and \\u202eevil" in logs.stdout
    assert not has_control(logs.stdout.replace("\n", ""), tab=True)
    # the forged records are plain output lines (shown, made visible); the good one is a record (hidden)
    assert '"restart": "one"' in logs.stdout and "9" * 400 in logs.stdout
    assert '"step": 3,' not in logs.stdout

    st = json.loads(ddpctl("status", job_name, "--json", check=True).stdout)
    assert st["records_rejected"] == 2 and len(st["ranks"]) == 1 and st["progress"]["step"] == 3
    assert st["progress"]["checkpoint"]["path"] == "/c/\x1b[2J\x1b]52;c;aGk=\x07ck"  # data, JSON-escaped
    text = ddpctl("status", job_name, check=True).stdout
    assert "(/c/\\x1b[2J\\x1b]52;c;aGk=\\x07ck)" in text and "step 3/12" in text
    assert "2 line(s) looked like progress records" in text and not has_control(text.replace("\n", ""))

    ps = ddpctl("ps", job_name, check=True).stdout
    assert "3/12 ETA" in ps and not has_control(ps.replace("\n", ""))
    ddpctl("down", job_name, check=True)
    gone = ddpctl("status", job_name, check=True).stdout
    assert "(/c/\\x1b[2J\\x1b]52;c;aGk=\\x07ck)" in gone and not has_control(gone.replace("\n", ""))


LIVE_SCRIPT = r'''
import json, time
base = {"event": "progress", "version": 1, "step": 1, "total": 4, "rank": 0, "world_size": 1, "restart": 0,
        "samples_per_sec": 5.0}
print(json.dumps({**base, "time": time.time()}), flush=True)
time.sleep(0.5)
print(json.dumps({**base, "time": time.time(), "step": 2, "samples_per_sec": float("nan"),
                  "step_time_s": float("inf")}), flush=True)
print(json.dumps({**base, "time": time.time() + 1e17, "step": 3, "samples_per_sec": 1e18, "step_time_s": 1e18}),
      flush=True)
print('{"event": "progress", "step": -50, "total": 100}', flush=True)
print("done \x1b]0;owned\x07 \x1b[2J", flush=True)
'''


def test_an_attached_up_on_a_terminal_outlives_nan_and_infinite_records(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "live.py").write_text(LIVE_SCRIPT)
    run = OnPty("--name", job_name, "--image", cpu_image, "--workdir", ".", "--", "python", "live.py", cwd=tmp_path)
    try:
        code = run.proc.wait(timeout=180)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    time.sleep(0.3)
    out = run.text
    assert code == 0, out[-3000:]
    assert "Traceback" not in out and "progress: step 1/4 (25%)" in out
    assert "done \\x1b]0;owned\\x07 \\x1b[2J" in out and "-50" not in out.replace('"step": -50', "")
    # ddpctl's own redraw of the live line is the only escape on the terminal
    assert not has_control(out.replace("\r\x1b[K", "").replace("\r\n", "").replace("\n", ""))
    assert not [c for c in engine.containers.list(filters={"label": f"ddpctl.job={job_name}"})]  # none running
