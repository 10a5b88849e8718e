"""A job's output kept on the real Docker Engine (CPU image): a job that prints forged records is taken ``down``
and ``logs``, ``status`` and ``ps --all`` still read its kept output; the kept folder is 0700 with 0600 files; a
link planted for the job's folder makes ``down`` fail in one line with the containers left in place;
``plot -o LINK`` is refused; ``up --resume`` of a job that never ran is refused (the output is kept under
XDG_STATE_HOME, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from itest_helpers import ddpctl

FORGED = r"""
import json, sys
print("hello from the job", flush=True)
good = {"event": "progress", "version": 1, "time": 1.0, "step": 1, "total": 4, "rank": 0, "samples_per_sec": 10.0}
print(json.dumps(good))
for bad in ('{"event": "progress", "step": 2, "rank": 0, "restart": "two", "time": 2.0}',
            '{"event": "progress", "step": 3, "rank": 0, "time": "late", "total": [1]}',
            '{"event": "progress", "step": 4, "rank": 0, "loss": ' + "9" * 400 + '}',
            '{"event": "progress", "step": 5, "rank": 0, "x": ' + "[" * 3000 + "]" * 3000 + '}',
            '{"event": "summary", "images_per_sec": "fast", "exit_code": 0}'):
    print(bad)
print("bye from the job", flush=True)
"""


def _state() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "ddpctl" / "jobs"


def _one_line(proc, code: int, needle: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def _containers(engine, job: str) -> list:
    return engine.containers.list(all=True, filters={"label": f"ddpctl.job={job}"})


def test_forged_records_then_down_logs_status_and_ps_all_read_the_kept_output(engine, cpu_image, job_name, tmp_path):
    (tmp_path / "forged.py").write_text(FORGED)
    up = ddpctl("up", "--name", job_name, "--image", cpu_image, "--workdir", ".", "--", "python", "forged.py",
                cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    down = ddpctl("down", job_name, check=True)
    assert "Traceback" not in down.stderr and _containers(engine, job_name) == []
    folder = _state() / job_name

    def no_constant(word):
        raise AssertionError(f"{word} in meta.json")

    meta = json.loads((folder / "meta.json").read_text(), parse_constant=no_constant)
    assert meta["job"] == job_name and meta["result"] == "succeeded" and meta["removed"] is True
    logs = ddpctl("logs", job_name, check=True)
    assert "hello from the job" in logs.stdout and "bye from the job" in logs.stdout
    status = ddpctl("status", job_name, check=True)
    assert job_name in status.stdout and "Traceback" not in status.stderr
    status_json = ddpctl("status", job_name, "--json", check=True)
    assert json.loads(status_json.stdout)["job"] == job_name
    # a folder an older or hostile run left: values of the wrong type never fail 'ps --all'
    hostile = folder.parent / f"{job_name}x"
    hostile.mkdir(mode=0o700)
    (hostile / "meta.json").write_text(json.dumps({"job": 5, "result": "failed", "ended": "yesterday", "nodes": [1],
                                                   "duration_s": "long", "final_samples_per_sec": "fast"}))
    ps = ddpctl("ps", "--all", check=True)
    row = next(r for r in ps.stdout.splitlines() if r.startswith(job_name + " "))
    assert "succeeded" in row and str(folder) in row
    assert any(r.startswith(f"{job_name}x ") and "failed" in r for r in ps.stdout.splitlines()), ps.stdout
    # kept output: folders 0700, files 0600 (also for the state folder itself)
    for p in [folder.parent, folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), (str(p), oct(mode))


def test_a_link_planted_for_the_kept_folder_fails_down_and_the_containers_stay(engine, cpu_image, job_name,
                                                                              tmp_path):
    up = ddpctl("up", "--name", job_name, "--image", cpu_image, "--", "python", "-c", "print('secret 42')")
    assert up.returncode == 0, up.stderr
    folder = _state() / job_name
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    down = ddpctl("down", job_name)
    _one_line(down, 1, "symbolic link")
    assert "its containers stay" in down.stderr
    assert len(_containers(engine, job_name)) == 1 and list(elsewhere.iterdir()) == []
    folder.unlink()
    ddpctl("down", job_name, check=True)
    assert _containers(engine, job_name) == [] and (folder / "meta.json").is_file()


def test_plot_output_through_a_link_is_refused(engine, cpu_image, job_name, tmp_path):
    victim = tmp_path / "victim.png"
    victim.write_text("untouched")
    link = tmp_path / "progress.png"
    link.symlink_to(victim)
    proc = ddpctl("plot", job_name, "-o", str(link))
    _one_line(proc, 2, "is a symbolic link, not a regular file")
    assert victim.read_text() == "untouched"


def test_up_resume_of_a_job_that_never_ran_is_refused(engine, cpu_image, job_name):
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--max-restarts", "1", "--resume", "--",
                  "python", "-c", "print(1)")
    _one_line(proc, 2, f"job {job_name} has no checkpoint volume")
    assert "resuming from its checkpoints" not in proc.stderr + proc.stdout
    assert _containers(engine, job_name) == []
