"""``ddpctl up --max-restarts`` on the real Docker Engine with the CPU image (gloo): node containers are
killed with ``docker kill`` from the test, as a lost machine or the OOM killer would.

The chaos test kills a random node three times at random steps of a deterministic ddp-train run and checks
that it completes every step with final weights bit-identical to an uninterrupted run of the same seed, that
no restart loses more than one checkpoint interval, and prints the time from each kill to the next training
step (the benchmark with the figure in docs/BENCHMARKS.md is benchmarks/recovery.py).
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

from itest_helpers import DDPCTL, ddpctl, labelled

SLEEPER = """
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
os.write(1, ("READY restart=%s\\n" % os.environ.get("DDPCTL_RESTART_COUNT")).encode())
while True:
    time.sleep(0.5)
"""

EVERY = 4  # checkpoint interval (steps) of the chaos run
STEPS = 64  # 4096 samples, 2 ranks x 32 per step
# 0.1 s a step: the step lines reach the test through docker logs and `up`, seconds late on a loaded 2-core
# machine; at full speed (about 30 ms a step) the job could end before a kill aimed at a step it has shown
TRAIN = ["ddp-train", "--deterministic", "--seed", "11", "--train-size", "4096", "--epochs", "1", "--no-eval",
         "--log-interval", "1", "--checkpoint-every", str(EVERY), "--output-dir", "/checkpoints",
         "--debug-step-sleep", "0.1"]
STEP_LINE = re.compile(r"^node-0 rank-0 \| epoch \d+/\d+ step \d+/\d+ \(global (\d+)\)")
RESUMED = re.compile(r"ddp-train: resumed from /checkpoints/ckpt-(\d+)\.pt")
FRESH = "ddp-train: no checkpoint to resume from; starting fresh"  # a kill before the first checkpoint

# sha256 of the model tensors (names and bytes, in name order) and of the whole file, for each checkpoint given
HASHES = """
import hashlib, sys, torch
for path in sys.argv[1:]:
    model = torch.load(path, map_location="cpu", weights_only=True)["model"]
    h = hashlib.sha256()
    for k in sorted(model):
        h.update(k.encode())
        h.update(bytes(model[k].contiguous().view(-1).view(torch.uint8).tolist()))
    print(h.hexdigest(), hashlib.sha256(open(path, "rb").read()).hexdigest())
"""


class Live:
    """ddpctl up in the background; every stdout/stderr line with the time it arrived."""

    def __init__(self, *args: str, cwd=None) -> None:
        self.proc = subprocess.Popen([DDPCTL, "up", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ, NO_COLOR="1"))
        self.q: queue.Queue = queue.Queue()
        self.lines: list[tuple[float, str, str]] = []
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name, stream) -> None:
        for line in stream:
            self.q.put((time.monotonic(), name, line.rstrip("\n")))
        self.q.put((time.monotonic(), name, None))

    def wait_for(self, test, timeout: float = 240, what: str = "") -> tuple[float, str]:
        """The first new line that ``test(stream, line)`` accepts; ``what`` names it in the failure."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                t, name, line = self.q.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                continue
            self.lines.append((t, name, line))
            if test(name, line):
                return t, line
        raise AssertionError(f"no {what or 'matching line'} from ddpctl up within {timeout:.0f} s; last lines:\n"
                             + "\n".join(x[2] for x in self.lines[-30:]))

    def finish(self, timeout: float = 300) -> int:
        rc = self.proc.wait(timeout=timeout)
        time.sleep(0.2)
        while not self.q.empty():
            t, name, line = self.q.get()
            if line is not None:
                self.lines.append((t, name, line))
        return rc

    def text(self, name: str) -> str:
        return "\n".join(line for _, n, line in self.lines if n == name)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def _volumes(client, job: str) -> list[str]:
    return [v.name for v in client.volumes.list(filters={"label": f"ddpctl.job={job}"})]


def _hashes(client, image: str, mounts: dict, paths: list[str]) -> list[tuple[str, str]]:
    out = client.containers.run(image, ["python3", "-c", HASHES, *paths], entrypoint=[], volumes=mounts,
                                network_mode="none", remove=True)
    return [tuple(line.split()) for line in out.decode().split("\n") if line.strip()]


def test_chaos_three_random_kills_end_bit_identical_to_an_uninterrupted_run(engine, cpu_image, job_name, tmp_path):
    seed = int(os.environ.get("DDPCTL_CHAOS_SEED", str(random.randrange(10**6))))
    rng = random.Random(seed)
    print(f"chaos seed {seed} (DDPCTL_CHAOS_SEED={seed} repeats it)")
    ref_dir = tmp_path / "uninterrupted"
    ref_dir.mkdir()
    # the uninterrupted run of the same seed, beside the chaos run (its own job, network and volume): the two
    # spend most of their time in step sleeps, restarts and container starts, so they overlap well
    pool = ThreadPoolExecutor(max_workers=1)
    ref_run = pool.submit(ddpctl, "up", "--name", f"{job_name}-ref", "--image", cpu_image, "--nodes", "2", "--rm",
                          "-v", f"{ref_dir}:/checkpoints", "--", *TRAIN, timeout=400)
    pool.shutdown(wait=False)

    run = Live("--name", job_name, "--image", cpu_image, "--nodes", "2", "--max-restarts", "3", "--", *TRAIN)
    lost, recovery = [], []
    try:
        _, line = run.wait_for(lambda n, s: bool(STEP_LINE.match(s)), what="step line")
        step = int(STEP_LINE.match(line).group(1))
        for k in range(3):
            target = step + rng.randint(1, 8)
            while step < target:
                _, line = run.wait_for(lambda n, s: bool(STEP_LINE.match(s)), what="step line")
                step = int(STEP_LINE.match(line).group(1))
            node = rng.randrange(2)
            t_kill = time.monotonic()
            victim = engine.containers.get(f"{job_name}-node-{node}")
            victim.kill()
            victim.reload()
            assert victim.attrs["State"]["ExitCode"] != 0 or victim.attrs["State"]["Running"], (
                f"kill {k + 1} came after node {node} had finished (log lines {step} steps in, seed {seed}): "
                "the step lines lag the job by more than its remaining steps")
            said = f"restart {k + 1}/3: "
            _, line = run.wait_for(lambda n, s, said=said: n == "err" and s.startswith(said), what=f"'{said}' line")
            assert line.startswith(f"{said}node {node} "), line  # the root cause is the killed node
            _, line = run.wait_for(lambda n, s: bool(RESUMED.search(s)) or FRESH in s, what="resumed/fresh line")
            resumed = int(RESUMED.search(line).group(1)) if RESUMED.search(line) else 0
            t_step, line = run.wait_for(lambda n, s: bool(STEP_LINE.match(s)), what="step line")
            assert int(STEP_LINE.match(line).group(1)) == resumed + 1
            # steps shown before the kill that are done again (negative: the kill came after a checkpoint whose
            # step line was not out yet)
            lost.append(step - resumed)
            recovery.append(t_step - t_kill)
            step = resumed + 1
        rc = run.finish()
    finally:
        run.kill()
        wait([ref_run], timeout=460)  # ddpctl's own timeout (400 s, then Ctrl-C) ends it before
    assert ref_run.done(), "the uninterrupted reference run ('ddpctl up') did not end within 460 s"
    ref = ref_run.result()
    assert ref.returncode == 0, ref.stderr[-2000:]
    print(f"kill -> next training step: {', '.join(f'{s:.1f}s' for s in recovery)}; steps redone: {lost}")
    out, err = run.text("out"), run.text("err")
    assert rc == 0, err[-3000:]
    assert all(n <= EVERY for n in lost), lost
    # ddp-train's own record (metrics.jsonl in the checkpoint volume, a line per step, appended by every start):
    # the last step each attempt finished, against the step the next one resumed from
    raw = engine.containers.run(cpu_image, ["cat", "/b/metrics.jsonl"], entrypoint=[], network_mode="none",
                                remove=True, volumes={f"{job_name}-ckpt": {"bind": "/b", "mode": "ro"}})
    attempts: list[list[int]] = []
    for rec in map(json.loads, raw.decode().splitlines()):
        if rec["event"] == "start":
            attempts.append([])
        elif rec["event"] == "step":
            attempts[-1].append(rec["step"])
    assert len(attempts) == 4 and attempts[-1][-1] == STEPS, [a[:1] + a[-1:] for a in attempts]
    redone = [before[-1] - (after[0] - 1) for before, after in zip(attempts, attempts[1:], strict=False)]
    print(f"steps redone per failure (metrics.jsonl): {redone}")
    assert all(n <= EVERY for n in redone), redone  # at most one checkpoint interval per failure
    assert err.count("\nrestart ") + err.startswith("restart ") == 3
    assert f"job {job_name} finished after 3 restart(s)" in err
    assert "lost a peer" not in out and "Traceback" not in out  # each restart is one line, on stderr
    summary = [line for line in out.splitlines() if '"event": "summary"' in line]
    assert summary and f'"steps": {STEPS}' in summary[-1]

    ps = [r.split() for r in ddpctl("ps", job_name, check=True).stdout.splitlines()[1:]]
    assert [(r[1], r[3], r[4], r[5]) for r in ps] == [("0", "exited", "0", "3"), ("1", "exited", "0", "3")]
    final = f"ckpt-{STEPS:08d}.pt"
    (a_model, a_file), (b_model, b_file) = _hashes(
        engine, cpu_image, {str(ref_dir): {"bind": "/a", "mode": "ro"},
                            f"{job_name}-ckpt": {"bind": "/b", "mode": "ro"}}, [f"/a/{final}", f"/b/{final}"])
    assert a_model == b_model, "the final weights differ from the uninterrupted run's"
    assert a_file == b_file  # the whole checkpoint (optimizer, step counters, RNG states) too

    down = ddpctl("down", job_name, check=True)
    assert "removed 2 container(s), 1 network(s) and 1 volume(s)" in down.stderr
    assert labelled(engine, job_name) == ([], []) and _volumes(engine, job_name) == []


def test_docker_stop_of_a_node_checkpoints_first_and_the_restart_loses_nothing(engine, cpu_image, job_name):
    """SIGTERM (docker stop, as an eviction or a preemption sends it): ddp-train saves at the next step and
    exits 143, a retryable code, so the job restarts from exactly that step."""
    run = Live("--name", job_name, "--image", cpu_image, "--nodes", "2", "--max-restarts", "1", "--", "ddp-train",
               "--train-size", "4096", "--epochs", "1", "--no-eval", "--log-interval", "1",
               "--checkpoint-every", "50")
    try:
        _, line = run.wait_for(lambda n, s: (m := STEP_LINE.match(s)) is not None and int(m.group(1)) >= 3,
                                what="step line >= 3")
        shown = int(STEP_LINE.match(line).group(1))
        engine.containers.get(f"{job_name}-node-1").stop(timeout=60)
        _, line = run.wait_for(lambda n, s: n == "err" and s.startswith("restart 1/1: "), what="'restart 1/1: ' line")
        assert "exited with code 143" in line
        _, line = run.wait_for(lambda n, s: bool(RESUMED.search(s)), what="resumed line")
        # at or past every step shown before the stop: the SIGTERM checkpoint (every 50 would have been step 0)
        assert int(RESUMED.search(line).group(1)) >= shown
        rc = run.finish()
    finally:
        run.kill()
    assert rc == 0, run.text("err")[-2000:]
    assert ddpctl("down", job_name).returncode == 0


def test_a_permanent_exit_code_is_not_restarted(engine, cpu_image, job_name):
    proc = ddpctl("up", "--name", job_name, "--image", cpu_image, "--nodes", "2", "--max-restarts", "2", "--",
                  "ddp-train", "--checkpoint-every", "2", "--debug-exit-rank", "1", "--debug-exit-step", "3",
                  timeout=300)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 17, proc.stderr
    assert "restart " not in proc.stderr
    assert last.startswith("error: node 1 (") and "exited with code 17" in last and "not restarted" in last
    states = {c.name: c.status for c in engine.containers.list(all=True, filters={"label": f"ddpctl.job={job_name}"})}
    assert sorted(states.values()) == ["exited", "exited"]
    assert ddpctl("down", job_name).returncode == 0 and _volumes(engine, job_name) == []


def _sleeper_job(tmp_path, job_name, image, restarts: str) -> Live:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    return Live("--name", job_name, "--image", image, "--nodes", "2", "--workdir", ".", "--max-restarts", restarts,
                "--", "python", "sleeper.py", cwd=tmp_path)


def _both_ready(run: Live, restart: int) -> None:
    for _ in range(2):
        run.wait_for(lambda n, s: s.endswith(f"READY restart={restart}"), what=f"READY restart={restart} line")


def test_after_the_last_allowed_restart_one_line_and_nothing_running(engine, cpu_image, job_name, tmp_path):
    run = _sleeper_job(tmp_path, job_name, cpu_image, "1")
    try:
        _both_ready(run, 0)
        engine.containers.get(f"{job_name}-node-1").kill()
        run.wait_for(lambda n, s: n == "err" and s.startswith("restart 1/1: node 1 "), what="'restart 1/1: node 1' line")
        _both_ready(run, 1)  # the nodes rejoined; the user's program sees DDPCTL_RESTART_COUNT
        engine.containers.get(f"{job_name}-node-0").kill()
        rc = run.finish(timeout=120)
    finally:
        run.kill()
    err = run.text("err").strip().splitlines()
    assert rc == 137
    assert err[-1].startswith(f"error: job {job_name} failed after its last allowed restart (1 of --max-restarts 1): "
                              f"node 0 ({job_name}-node-0) of job {job_name} exited with code 137 (killed)")
    assert sum(line.startswith("restart ") for line in err) == 1
    states = [c.status for c in engine.containers.list(all=True, filters={"label": f"ddpctl.job={job_name}"})]
    assert states == ["exited", "exited"]


def test_max_restarts_0_fails_fast(engine, cpu_image, job_name, tmp_path):
    run = _sleeper_job(tmp_path, job_name, cpu_image, "0")
    try:
        _both_ready(run, "None")  # no restarts: no DDPCTL_RESTART_COUNT either
        engine.containers.get(f"{job_name}-node-1").kill()
        rc = run.finish(timeout=120)
    finally:
        run.kill()
    err = run.text("err")
    assert rc == 137 and "restart" not in err
    assert err.strip().splitlines()[-1].startswith(f"error: node 1 ({job_name}-node-1) of job {job_name} exited "
                                                   "with code 137")


def test_ctrl_c_during_a_restart_leaves_nothing(engine, cpu_image, job_name, tmp_path):
    run = _sleeper_job(tmp_path, job_name, cpu_image, "3")
    try:
        _both_ready(run, 0)
        assert _volumes(engine, job_name) == [f"{job_name}-ckpt"]
        engine.containers.get(f"{job_name}-node-0").kill()
        run.wait_for(lambda n, s: n == "err" and s.startswith("restart 1/3: "), what="'restart 1/3: ' line")
        run.proc.send_signal(signal.SIGINT)
        rc = run.finish(timeout=120)
    finally:
        run.kill()
    assert rc == 130, run.text("err")
    assert f"job {job_name} stopped and removed" in run.text("err")
    assert labelled(engine, job_name) == ([], []) and _volumes(engine, job_name) == []
