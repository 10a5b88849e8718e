#!/bin/bash
# Issue 13, round 3: ONE device call on nvidia-h100-x4 (~8.8 min; every phase has a time guard, the bench gets
# what is left and ends by T+525 s). In order of what decides the next step:
#   1. ResNet-18 CIFAR whole-step graph, flat vs bucketed reducer (25 and 8 MiB) at 1/2/4 GPUs (~110 s)
#   2. torch.profiler traces of 10 replays (1 GPU flat, 4 GPUs flat, 4 GPUs bucketed 8 MiB) and their
#      breakdown per rank: compute, NCCL exposed/hidden, idle, gaps between replays (~50 s)
#   3. the GPU tests: the compile loss curve at lr 0.02 + warm-up (never run yet), bucketed vs flat (~90 s)
#   4. torch.compile + graph: 1 GPU, 4 GPUs flat, 4 GPUs bucketed (~105 s)
#   5. the report: ddpctl bench (CIFAR ResNet-18: single, ddp, dp; gpu and classic pipelines; 1/2/4 GPUs;
#      --repeat 3) with the time left (~170 s: about one repeat; PART=report gives a whole call to it)
# Outputs under $OUT (at most 8 files come back): console.log is the caller's; x.tgz (every run's JSON,
# traces, breakdown, smi samples, topology), gpu-tests.log, report/ (report.md, report.json, PNGs; logs.tgz).
#   bash benchmarks/gpu_round3_issue13.sh 2>&1 | tee $OUT/console.log        (OUT=dir; default /tmp/out)
#   PART=report bash benchmarks/gpu_round3_issue13.sh   # only the bench, --repeat 3, 520 s budget
#   DRY_RUN=cpu bash benchmarks/gpu_round3_issue13.sh   # here, on CPU: every command line with tiny sizes
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset TORCH_NCCL_BLOCKING_WAIT  # the bucketed reducer's Work.wait() must be a stream wait inside the graph
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/x"
PY=${PY:-python3}
PART=${PART:-all}
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
before() { [ $(( $(date +%s) - T0 )) -lt "$1" ] || { el "skipped (time guard $1 s): $2"; false; }; }
DRY=${DRY_RUN:-}
if [ "$DRY" = cpu ]; then
  # the same command lines on CPU: tiny model and data, gloo, eager steps (graph mode needs CUDA) with graph
  # mode's reducers switched on in eager steps, no compile (inductor on 2 cores takes minutes)
  EXTRA="--device cpu --backend gloo --workload toy --model toy-cnn --train-size 2048 --test-size 256 --batch-size 16
         --step-mode eager --debug-reducer-in-eager --no-compile"
  TT="--scale 0.02 --warmup 2"
  DRY_TIMEOUT=120
  BENCH_ENV="dry"
  G=(1 2 4)
else
  EXTRA=""
  TT=""
  DRY_TIMEOUT=
  BENCH_ENV="gpu"
  G=(1 2 4)
fi
tt() {  # tt NAME CONFIGS TIMEOUT_S [extra ddp-train flags]: benchmarks/train_throughput.py, one JSON per call
  local name=$1 only=$2 limit=${DRY_TIMEOUT:-$3}; shift 3
  $PY benchmarks/train_throughput.py --only "$only" $TT --timeout "$limit" --extra "$EXTRA $*" \
    --out "$OUT/x/$name.json" 2>&1 | grep -v '^|\|^$\|^{\|^}\|^ "'
}

el "machine"
if [ -z "$DRY" ]; then
  nvidia-smi -L; nvidia-smi topo -m > "$OUT/x/topo.txt" 2>&1
  nvidia-smi --query-gpu=timestamp,index,temperature.gpu,clocks.sm,power.draw,utilization.gpu,clocks_throttle_reasons.active \
    --format=csv -l 2 > "$OUT/x/smi.csv" 2>&1 &
  SMI=$!
fi
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count(),
'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else '-')"

if [ "$PART" = all ]; then
  el "1. ResNet-18 graph: flat vs bucketed (25 MiB: 2 buckets; 8 MiB: 5 buckets) at 1/2/4 GPUs"
  tt ab r18-graph-1,r18-graph-2,r18-graphbk8-2,r18-graph-4,r18-graphbk-4,r18-graphbk8-4 45

  el "2. profiles: 10 replays each, every rank (1 GPU flat, 4 GPUs flat, 4 GPUs bucketed 8 MiB)"
  before 170 "profile 1 GPU" && tt prof1 r18-graph-1 45 --profile-dir "$OUT/x/prof-1gpu-flat" --profile-steps 10
  before 190 "profile 4 GPUs flat" && tt prof4 r18-graph-4 45 --profile-dir "$OUT/x/prof-4gpu-flat" --profile-steps 10
  before 210 "profile 4 GPUs bucketed" && tt prof4b r18-graphbk8-4 45 --profile-dir "$OUT/x/prof-4gpu-bk8" --profile-steps 10
  ls -d "$OUT"/x/prof-* >/dev/null 2>&1 && \
    $PY benchmarks/trace_breakdown.py "$OUT"/x/prof-* --json "$OUT/x/breakdown.json" | tee "$OUT/x/breakdown.md"

  el "3. GPU tests: compile loss curve (lr 0.02 + warm-up), bucketed vs flat in the graph"
  if before 270 "GPU tests"; then
    timeout -k 5 150 $PY -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py \
      -k "compile_loss_curve or bucketed" 2>&1 | tail -40 > "$OUT/gpu-tests.log"
    cat "$OUT/gpu-tests.log"
  fi

  el "4. torch.compile + graph: 1 GPU (the fastest 1-GPU configuration), 4 GPUs flat, 4 GPUs bucketed"
  before 330 "compile 1 and 4 GPUs flat" && tt compile r18-graphc-1,r18-graphc-4 75
  before 395 "compile 4 GPUs bucketed" && tt compilebk r18-graphcbk8-4 75
fi

el "5. report: ddpctl bench --repeat 3 with the time left"
END=${BENCH_END:-525}
[ "$PART" = report ] && END=${BENCH_END:-540}
LEFT=$(( END - ($(date +%s) - T0) ))
if [ "$LEFT" -ge 60 ] || [ -n "$DRY" ]; then
  $PY - "$OUT/report" "$LEFT" "$BENCH_ENV" <<'PY'
import sys
from pathlib import Path

from ddpctl.bench import BenchOptions, run_bench

out, budget, env = Path(sys.argv[1]), max(30, int(sys.argv[2])), sys.argv[3]
if env == "dry":  # the same options with CPU-sized runs (dp is dropped on a CPU host)
    opts = BenchOptions(workloads=("cifar10-resnet18",), strategies=("single", "dp", "ddp"), gpus=(1, 2),
                        pipelines=("gpu", "classic"), repeat=1, batch_size=8, warmup=1, steps=2,
                        time_budget_s=budget, cell_timeout_s=120, probe_max_bytes=1 << 20)
else:
    opts = BenchOptions(workloads=("cifar10-resnet18",), strategies=("single", "dp", "ddp"), gpus=(1, 2, 4),
                        pipelines=("gpu", "classic"), repeat=3, time_budget_s=budget, cell_timeout_s=60,
                        probe_max_bytes=64 << 20)
run_bench(opts, out,
          command="ddpctl bench --gpus 1,2,4 --workloads cifar10-resnet18 --strategies single,dp,ddp "
                  f"--pipelines gpu,classic --repeat 3 --time-budget {budget} --cell-timeout 60 --probe-max 64m")
PY
  el "bench done rc=$?"
else
  el "bench skipped: only $LEFT s left"
fi

[ -n "${SMI:-}" ] && kill "$SMI" 2>/dev/null
# at most 8 files come back: console.log, gpu-tests.log, x.tgz, report/{report.md,report.json,3 PNGs}
[ -d "$OUT/report/logs" ] && mv "$OUT/report/logs" "$OUT/x/bench-logs"
el "summary"
$PY - "$OUT/x" <<'PY'
import glob, json, os, sys
print("| config | GPUs | img/s | step ms | util % | reducer/buckets | start-up s | train loss | error |")
print("|---|---|---|---|---|---|---|---|---|")
for f in ("ab", "compile", "compilebk"):
    p = os.path.join(sys.argv[1], f + ".json")
    if not os.path.exists(p):
        continue
    for r in json.load(open(p)).get("results", []):
        s = r.get("summary") or {}
        st = s.get("step_time_s")
        print(f"| {r['name']} | {r['gpus']} | {s.get('images_per_sec')} | {round(st * 1000, 3) if st else ''} | "
              f"{s.get('gpu_util')} | {s.get('graph_reducer')}/{s.get('graph_buckets')} | {s.get('startup_s')} | "
              f"{s.get('train_loss')} | {(r.get('error') or '')[-200:]} |")
PY
[ -f "$OUT/x/breakdown.md" ] && cat "$OUT/x/breakdown.md"
[ -f "$OUT/gpu-tests.log" ] && tail -3 "$OUT/gpu-tests.log"
[ -f "$OUT/report/report.md" ] && grep -A8 "^## Headline" "$OUT/report/report.md"
tar czf "$OUT/x.tgz" -C "$OUT" x && rm -rf "$OUT/x"
el "done"
ls -la "$OUT" "$OUT/report" 2>/dev/null
