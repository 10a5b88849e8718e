"""A fixed set of CPU ddp-train runs whose results must not change when ddp-train's code is reorganised.

Each scenario runs real processes (torchrun or the launcher, gloo on CPU) and records what the run produced: the
summary line without its timing figures, the SHA-256 of every checkpoint file, and whatever else the scenario
makes (sample logs, exit codes). A reorganisation that changes none of ddp-train's behaviour gives the same record
byte for byte.

    python tests/support/ddp_train_scenarios.py --record tests/support/ddp_train_scenarios.json
    python tests/support/ddp_train_scenarios.py --check tests/support/ddp_train_scenarios.json [NAME ...]

(with ``PYTHONPATH=src``). ``tests/distributed/test_ddp_train_scenarios.py`` runs the check. Float results
depend on the CPU's kernels, so the record holds one entry per fingerprint of a machine's arithmetic (`probe`,
on one thread as the scenarios run); ``--record`` adds or replaces this machine's entry, and a check on a
machine with no entry compares nothing and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from ddp_helpers import TOY, _finish, env, ok, run, summary, torchrun

# summary keys that measure time or the machine, not what the run computed
VOLATILE = ("images_per_sec", "images_per_sec_per_rank", "step_time_s", "data_time_s", "epoch_time_s", "gpu_util",
            "gpu_mem_gb", "startup_s", "warmup_iters_s", "capture_s", "wall_time_s", "device_name", "threads")
BASE = TOY + ["--deterministic", "--log-interval", "1"]


def _sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stable(s: dict) -> dict:
    out = {k: v for k, v in s.items() if k not in VOLATILE}
    for k in ("checkpoint", "resumed_from"):
        if out.get(k):
            out[k] = os.path.basename(out[k])
    return out


def _files(d, prefix="") -> dict:
    """SHA-256 of every checkpoint (and sidecar) and sample log under ``d``."""
    found = {}
    if not os.path.isdir(d):
        return found
    for name in sorted(os.listdir(d)):
        if name.startswith("ckpt-") or name.startswith("samples-"):
            found[prefix + name] = _sha(os.path.join(d, name))
    return found


def _events(out_dir, kind):
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [r for r in (json.loads(ln) for ln in f if ln.strip()) if r["event"] == kind]


def eager_ddp(tmp):
    out = os.path.join(tmp, "out")
    s = summary(ok(torchrun(2, BASE + ["--output-dir", out, "--checkpoint-every", "5", "--keep-checkpoints", "20",
                                      "--sync-check-every", "4"])[0]))
    return {"summary": _stable(s), "files": _files(out)}


def own_reducer(kind):
    def scenario(tmp):
        out = os.path.join(tmp, "out")
        s = summary(ok(torchrun(2, BASE + ["--epochs", "1", "--output-dir", out, "--debug-reducer-in-eager",
                                          "--graph-reducer", kind, "--bucket-mb", "0.01", "--sync-check-every",
                                          "3"])[0]))
        return {"summary": _stable(s), "files": _files(out)}

    return scenario


def elastic_fewer_ranks(tmp):
    out, log1, log2 = (os.path.join(tmp, n) for n in ("out", "log1", "log2"))
    args = BASE + ["--no-eval", "--output-dir", out, "--scale-lr", "--warmup-epochs", "0.5"]
    s1 = summary(ok(torchrun(3, args + ["--max-steps", "3", "--debug-sample-log", log1])[0]))
    first = _files(out)
    p = ok(torchrun(2, args + ["--resume", "auto", "--debug-sample-log", log2])[0])
    return {"summary_3": _stable(s1), "summary_2": _stable(summary(p)), "files_3": first, "files_2": _files(out),
            "samples": {**_files(log1, "3:"), **_files(log2, "2:")},
            "elastic_line": [ln for ln in p.stdout.splitlines() if "elastic resume" in ln],
            "warning": [ln for ln in p.stderr.splitlines() if "warning" in ln]}


def stop_signal(tmp):
    out = os.path.join(tmp, "out")
    args = BASE + ["--no-eval", "--sync-check", "off", "--output-dir", out]
    cmd = [sys.executable, "-m", "ddp_train.launcher.run", "--standalone", "--nproc-per-node", "2", "-m", "ddp_train",
           *args, "--debug-step-sleep", "0.3"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    deadline = time.monotonic() + 150
    while not any(r["step"] >= 3 for r in _events(out, "step")):
        assert p.poll() is None and time.monotonic() < deadline, "the run ended or stalled before step 3"
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    res = _finish(p, cmd, 90)
    [pre] = _events(out, "preempted")
    step = pre["step"]
    stopped = [ln.split("| ", 1)[-1].replace(f"step {step}", "step N").replace(f"{step:08d}", "0000000N")
               .replace(out, "OUT") for ln in res.stderr.splitlines() if "ddp-train: stopped" in ln]
    s = summary(ok(torchrun(2, args + ["--resume", "auto"])[0]))
    final = os.path.join(out, "ckpt-00000016.pt")
    return {"exit_code": res.returncode, "signal": pre["signal"], "stopped_lines": sorted(set(stopped)),
            "reasons": [c["reason"] for c in _events(out, "checkpoint")],
            "steps_after_resume": s["steps"], "final": _sha(final)}


def mnist_single_resume(tmp):
    out = os.path.join(tmp, "out")
    args = ["--workload", "mnist", "--train-size", "256", "--test-size", "64", "--batch-size", "32", "--epochs", "2",
            "--deterministic", "--strategy", "single", "--output-dir", out]
    s1 = summary(ok(run(args + ["--max-steps", "5"])))
    s2 = summary(ok(run(args + ["--resume", "auto"])))
    return {"summary_1": _stable(s1), "summary_2": _stable(s2), "files": _files(out)}


def pipelines(tmp):
    rec = {}
    for name, extra in (("dataloader", ["--data-pipeline", "dataloader", "--workers", "1"]),
                        ("classic", ["--data-pipeline", "classic", "--workers", "0", "--no-augment"])):
        out = os.path.join(tmp, name)
        s = summary(ok(run(BASE + ["--epochs", "1", "--strategy", "single", "--output-dir", out, *extra])))
        rec[name] = {"summary": _stable(s), "files": _files(out)}
    return rec


def compile_blocks(tmp):
    out = os.path.join(tmp, "out")
    s = summary(ok(run(BASE + ["--strategy", "single", "--max-steps", "4", "--output-dir", out, "--compile",
                               "--compile-scope", "blocks", "--debug-compile-backend", "aot_eager"], timeout=300)))
    return {"summary": _stable(s), "files": _files(out)}


def sync_failure(tmp):
    p = torchrun(2, BASE + ["--epochs", "1", "--max-steps", "4", "--debug-perturb-rank", "1"])[0]
    return {"exit_code": p.returncode, "summary": _stable(summary(p)),
            "error": [ln for ln in p.stderr.splitlines() if "sync check failed" in ln][:1]}


SCENARIOS = {
    "eager_ddp": eager_ddp,
    "own_reducer_flat": own_reducer("flat"),
    "own_reducer_bucketed": own_reducer("bucketed"),
    "elastic_fewer_ranks": elastic_fewer_ranks,
    "stop_signal": stop_signal,
    "mnist_single_resume": mnist_single_resume,
    "pipelines": pipelines,
    "compile_blocks": compile_blocks,
    "sync_failure": sync_failure,
}


def probe() -> str:
    """A fingerprint of this machine's float results for the ops the scenarios use (conv, matmul, BN), on one
    thread as the scenarios' processes run (ddp_helpers.env sets OMP_NUM_THREADS=1): the thread count of the
    process asking would change it, not the scenarios' results."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _probe(torch)
    finally:
        torch.set_num_threads(threads)


def _probe(torch) -> str:
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(8 * 30 * 30, 10))
    x = torch.randn(4, 3, 32, 32)
    loss = torch.nn.functional.cross_entropy(net(x), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    h = hashlib.sha256(loss.detach().numpy().tobytes())
    for p in net.parameters():
        h.update(p.grad.numpy().tobytes())
    return f"torch {torch.__version__}, 1 thread: {h.hexdigest()}"


def run_scenarios(names) -> dict:
    out = {}
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"ddp-scenario-{name}-") as tmp:
            t0 = time.monotonic()
            out[name] = SCENARIOS[name](tmp)
            print(f"{name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--record", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    p.add_argument("names", nargs="*", choices=[*SCENARIOS, []], help="scenarios (default: all)")
    a = p.parse_args(argv)
    names = a.names or list(SCENARIOS)
    if a.record:
        try:
            with open(a.record) as f:
                records = json.load(f)["records"]
        except FileNotFoundError:
            records = []
        here = probe()
        mine = next((r for r in records if r["probe"] == here), None)
        if mine is None:
            records.append(mine := {"probe": here, "scenarios": {}})
        mine["scenarios"].update(run_scenarios(names))
        with open(a.record, "w") as f:
            json.dump({"records": records}, f, indent=1, sort_keys=True)
            f.write("\n")
        return 0
    with open(a.check) as f:
        want = record_for(json.load(f), probe())
    if want is None:
        print("skipped: no record of this machine's float results (make one with --record at a commit known good)")
        return 0
    got = run_scenarios(names)
    bad = [n for n in names if got[n] != want[n]]
    for n in bad:
        print(f"{n} differs:\n want {json.dumps(want[n], sort_keys=True)}\n got  {json.dumps(got[n], sort_keys=True)}")
    return 1 if bad else 0


def record_for(doc: dict, here: str) -> dict | None:
    """The recorded scenarios of the machine whose float results ``here`` fingerprints (None: not recorded)."""
    return next((r["scenarios"] for r in doc["records"] if r["probe"] == here), None)


if __name__ == "__main__":
    sys.exit(main())
