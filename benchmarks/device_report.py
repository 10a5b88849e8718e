"""The GPU machine report, in one call: GPU tests, the `ddpctl bench` reports (NVLink and the two-node socket
emulation), ddp-train's default long run, and the network-bound ablation; every stage guarded by one deadline.

Run from the repository root on a machine with torch and GPUs (no install: src/ goes on PYTHONPATH):

    python3 benchmarks/device_report.py --out "$OUT" --deadline 540 --stages tests,bench,network
    python3 benchmarks/device_report.py --out /tmp/r --stages network --repeat 1     # one stage, quickly

Stages (run in this order, each skipped with a line when the deadline leaves too little for it):

- ``info``: nvidia-smi -L and topo -m, torch / NCCL versions (always);
- ``tests``: pytest tests/distributed/test_ddp_train_gpu.py (``--tests-k`` selects), full output kept;
- ``bench``: ddpctl bench, CIFAR ResNet-18, single/dp/ddp, 1, 2, N GPUs, device pipeline, ``--repeat``;
- ``network``: ddpctl bench, ImageNet-synthetic ResNet-50, single/ddp at 1 and N GPUs, links local and socket
  (N/2 + N/2 over loopback sockets), ``--repeat``;
- ``ablation``: ResNet-50 over the socket link at N ranks with what a user had before the defaults: NCCL's socket
  defaults + no compression + flat reducer; ddpctl's socket settings alone; the defaults (ddp-train's auto);
- ``long``: benchmarks/default_long_run.py at 1 and N GPUs (``--long-epochs``, followed ``--long-seconds``).

Back under --out (at most 8 files, 2 folders down, for the lent machines): console.log is the caller's tee;
summary.json (every figure), gpu-tests.log, bench/report.{md,json}, network/report.{md,json}, rest.tgz (logs,
plots, run JSON). The last thing printed is a short table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import benchlib  # noqa: E402

benchlib.use_src()
STAGES = ("info", "tests", "bench", "network", "ablation", "long")


def stage_info(a, out: Path, res: dict) -> None:
    import torch

    res["torch"] = torch.__version__
    res["gpus"] = torch.cuda.device_count()
    res["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    for name, argv in (("smi.txt", ["nvidia-smi", "-L"]), ("topo.txt", ["nvidia-smi", "topo", "-m"])):
        benchlib.run(argv, log=out / "x" / name, timeout=30)
    res["device"] = (out / "x" / "smi.txt").read_text(errors="replace").splitlines()[1:2]


def stage_tests(a, out: Path, res: dict, dl: benchlib.Deadline) -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
            "tests/distributed/test_ddp_train_gpu.py"] + (["-k", a.tests_k] if a.tests_k else [])
    rc = benchlib.run(argv, log=out / "gpu-tests.log", timeout=dl.cap(a.tests_timeout, reserve=30))
    tail = (out / "gpu-tests.log").read_text(errors="replace").strip().splitlines()[-1:]
    res["gpu_tests"] = {"exit_code": rc, "last_line": tail[0] if tail else ""}


SMOKE = {}  # --smoke: the toy workload, a few steps (a check of the tool on a CPU host, nothing measured)


def _bench(name: str, out: Path, dl: benchlib.Deadline, reserve: float, **kw) -> dict:
    from ddpctl.bench import BenchOptions, run_bench

    kw.update(SMOKE)
    budget = max(60.0, dl.left() - reserve)
    opts = BenchOptions(time_budget_s=budget, **kw)
    names = {"cell_timeout_s": "cell-timeout", "probe_max_bytes": "probe-max"}
    shown = {**kw, **({"probe_max_bytes": f"{kw['probe_max_bytes'] >> 20}m"} if "probe_max_bytes" in kw else {}),
             **({"cell_timeout_s": f"{kw['cell_timeout_s']:g}"} if "cell_timeout_s" in kw else {})}
    flags = " ".join(f"--{names.get(k, k.replace('_', '-'))} {','.join(map(str, v)) if isinstance(v, tuple) else v}"
                     for k, v in shown.items())
    rep, _ = run_bench(opts, out / name, command=f"ddpctl bench {flags} --time-budget {budget:.0f}", plots=True)
    cells = {c["key"]: c for c in rep["cells"]}
    return {"duration_s": rep["duration_s"],
            "cells": {k: {"img_s": c["images_per_sec"]["median"] if c["images_per_sec"] else None,
                          "spread": c["images_per_sec"]["spread"] if c["images_per_sec"] else None,
                          "eff": c["scaling_efficiency"], "mode": c.get("step_mode"),
                          "errors": [r["error"] for r in c["runs"] if r["error"]]} for k, c in cells.items()},
            "busbw": [(p["world_size"], p.get("link"), p.get("busbw_at_max_gbps")) for p in rep["interconnect"]],
            "advice": rep.get("link_advice", [])}


def stage_ablation(a, out: Path, res: dict, dl: benchlib.Deadline) -> None:
    """ResNet-50 at N ranks over the socket link: before the defaults, the socket settings alone, the defaults."""
    from ddpctl.bench.programs import HostRunner, Launch
    from ddpctl.bench.runner import SOCKET_ENV, SOCKET_NCCL_DEFAULTS, parse_event

    n = a.n
    base = ("--workload", "imagenet-synthetic", "--model", "resnet50", "--batch-size", "256", "--warmup-steps", "20",
            "--max-steps", "100", "--epochs", "1000", "--no-eval", "--progress", "lines")
    variants = [("nccl-defaults,fp32,flat", SOCKET_NCCL_DEFAULTS, ("--grad-compression", "none", "--graph-reducer",
                                                                    "flat", "--bucket-mb", "25")),
                ("socket-settings,fp32,flat", SOCKET_ENV, ("--grad-compression", "none", "--graph-reducer", "flat",
                                                           "--bucket-mb", "25")),
                ("defaults (auto)", SOCKET_ENV, ())]
    runner = HostRunner(env=benchlib.gpu_env())
    res["ablation"] = {}
    for name, env, extra in variants:
        if not dl.allows(60, f"ablation {name}"):
            break
        launch = Launch(name, "ddp_train", base + extra, nprocs=n, distributed=True, gpus=n, nodes=2, env=env)
        r = runner.run(launch, timeout=dl.cap(150, reserve=20), log=out / "x" / f"ablation-{name.split()[0]}.log")
        s = parse_event(r.stdout, "summary") or {}
        first = next((x for x in r.stdout.splitlines() if "ddp-train: step:" in x), "")
        res["ablation"][name] = {"exit_code": r.returncode, "img_s": s.get("images_per_sec"),
                                 "step_mode": s.get("step_mode"), "grad_compression": s.get("grad_compression"),
                                 "graph_reducer": s.get("graph_reducer"), "comm": first.split(" | ")[1:2]}


def stage_long(a, out: Path, res: dict, dl: benchlib.Deadline) -> None:
    res["long"] = {}
    for g in (1, a.n):
        need = a.long_seconds + 60
        if not dl.allows(need, f"long run on {g} GPU(s)"):
            break
        js = out / "x" / f"long-{g}.json"
        benchlib.run([sys.executable, "benchmarks/default_long_run.py", "--gpus", str(g), "--seconds",
                      str(a.long_seconds), "--epochs", str(a.long_epochs), "--out", str(js)],
                     log=out / "x" / f"long-{g}.log", timeout=dl.cap(need + 60, reserve=10))
        res["long"][g] = json.loads(js.read_text()) if js.exists() else {"error": "no result"}


def table(res: dict, n: int) -> list[str]:
    rows = []
    b = res.get("bench", {}).get("cells", {})
    one = b.get("cifar10-resnet18/device/single/1", {}).get("img_s")
    for g in sorted({2, n}):
        c = b.get(f"cifar10-resnet18/device/ddp/{g}", {})
        rows.append((f"R18 CIFAR ddp x{g} (bench)", c.get("img_s"), c.get("eff"), ">= 0.95"))
    for g in sorted({2, n}):
        c = b.get(f"cifar10-resnet18/device/dp/{g}", {})
        rows.append((f"R18 CIFAR dp x{g} completes", c.get("img_s"), None, f"errors: {c.get('errors')}"))
    w = res.get("network", {}).get("cells", {})
    r1 = w.get("imagenet-synthetic-resnet50/device/single/1", {}).get("img_s")
    for key, label, target in ((f"imagenet-synthetic-resnet50/device/ddp/{n}", f"R50 ddp x{n} NVLink", ">= 0.985"),
                               (f"imagenet-synthetic-resnet50/device/ddp/{n}/socket", f"R50 2x{n // 2} sockets", ">= 0.90")):
        c = w.get(key, {})
        rows.append((label, c.get("img_s"), c.get("eff"), target))
    for name, v in res.get("ablation", {}).items():
        eff = v["img_s"] / (n * r1) if v.get("img_s") and r1 else None
        rows.append((f"R50 2x{n // 2} sockets: {name}", v.get("img_s"), eff, ""))
    lg = res.get("long", {})
    if lg.get(1, {}).get("images_per_sec_median") and lg.get(n, {}).get("images_per_sec_median"):
        l1, ln = lg[1]["images_per_sec_median"], lg[n]["images_per_sec_median"]
        rows.append(("long run x1 (default)", l1, 1.0, ""))
        rows.append((f"long run x{n} (default)", ln, ln / (n * l1), ">= 0.95"))
    if "gpu_tests" in res:
        rows.append(("GPU tests", None, None, res["gpu_tests"]["last_line"][:60]))
    out = [f"{'what':44} {'img/s':>10} {'eff':>7}  target/note", "-" * 90]
    for name, ips, eff, note in rows:
        out.append(f"{name:44} {'-' if ips is None else format(ips, ',.0f'):>10} "
                   f"{'-' if eff is None else format(eff, '.3f'):>7}  {note}")
    if one:
        out.append(f"(R18 1-GPU baseline {one:,.0f} img/s; R50 1-GPU {r1 or 0:,.0f} img/s)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds for everything (default 540)")
    ap.add_argument("--stages", default="tests,bench,network,ablation,long",
                    help=f"comma-separated, from: {', '.join(STAGES[1:])} (info always runs)")
    ap.add_argument("--gpus", type=int, default=None, help="N, the largest count (default: all, at most 4)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tests-k", default=None, help="pytest -k for the tests stage")
    ap.add_argument("--tests-timeout", type=float, default=240.0)
    ap.add_argument("--bench-reserve", type=float, default=None,
                    help="seconds the bench stage leaves for the stages after it (default: what they need)")
    ap.add_argument("--long-seconds", type=float, default=45.0)
    ap.add_argument("--long-epochs", type=int, default=2000)
    ap.add_argument("--smoke", action="store_true", help="toy workload, few steps: check the tool on a CPU host")
    a = ap.parse_args()
    if a.smoke:
        SMOKE.update(workloads=("toy",), warmup=1, steps=3, batch_size=8)
    stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad:
        ap.error(f"unknown stage(s) {', '.join(bad)}; use {', '.join(STAGES)}")
    dl = benchlib.Deadline(a.deadline)
    a.out.mkdir(parents=True, exist_ok=True)
    res: dict = {"stages": stages, "argv": sys.argv[1:]}
    stage_info(a, a.out, res)
    a.n = a.gpus or min(4, res["gpus"]) or 2
    benchlib.say(f"{res['gpus']} GPUs ({res['device']}), torch {res['torch']}, NCCL {res['nccl']}; N = {a.n}")
    need_after = {"bench": 0, "network": 0}
    need_after["bench"] = (190 if "network" in stages else 0) + (200 if "ablation" in stages else 0) + \
        (2 * (a.long_seconds + 60) if "long" in stages else 0)
    need_after["network"] = need_after["bench"] - (190 if "network" in stages else 0)
    counts = tuple(sorted({1, 2, a.n}))
    for st in stages:
        benchlib.say(f"stage {st}")
        try:
            if st == "tests" and dl.allows(90, "GPU tests"):
                stage_tests(a, a.out, res, dl)
            elif st == "bench" and dl.allows(90, "bench"):
                res["bench"] = _bench("bench", a.out, dl, a.bench_reserve if a.bench_reserve is not None else
                                      need_after["bench"], workloads=("cifar10-resnet18",),
                                      strategies=("single", "dp", "ddp"), gpus=counts, pipelines=("device",),
                                      repeat=a.repeat, cell_timeout_s=120.0, probe_max_bytes=256 << 20)
            elif st == "network" and dl.allows(90, "network bench"):
                res["network"] = _bench("network", a.out, dl, need_after["network"],
                                        workloads=("imagenet-synthetic-resnet50",), strategies=("single", "ddp"),
                                        gpus=(1, a.n), pipelines=("device",), links=("local", "socket"),
                                        repeat=a.repeat, cell_timeout_s=150.0, probe_max_bytes=256 << 20)
            elif st == "ablation":
                stage_ablation(a, a.out, res, dl)
            elif st == "long":
                stage_long(a, a.out, res, dl)
        except Exception as exc:  # noqa: BLE001 - one stage's crash must not lose the others' results
            res.setdefault("errors", []).append(f"{st}: {type(exc).__name__}: {exc}")
            benchlib.say(f"stage {st} failed: {type(exc).__name__}: {exc}")
        (a.out / "summary.json").write_text(json.dumps(res, indent=1, default=str))
    keep = {"console.log", "summary.json", "gpu-tests.log"}
    with tarfile.open(a.out / "rest.tgz", "w:gz") as tf:
        for p in sorted(a.out.rglob("*")):
            rel = p.relative_to(a.out)
            if p.is_file() and str(rel) not in keep and p.name != "rest.tgz" and not (
                    len(rel.parts) == 2 and rel.parts[0] in ("bench", "network") and p.suffix in (".md", ".json")):
                tf.add(p, arcname=str(rel))
    for d in ("bench", "network", "x"):  # what is in rest.tgz stays out of the files sent back
        for p in sorted((a.out / d).rglob("*"), reverse=True) if (a.out / d).exists() else []:
            rel = p.relative_to(a.out)
            if p.is_file() and not (len(rel.parts) == 2 and p.suffix in (".md", ".json") and d != "x"):
                p.unlink()
            elif p.is_dir():
                p.rmdir() if not any(p.iterdir()) else None
    print("\n".join(table(res, a.n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
