#!/bin/bash
# Issue 13, round 4: ONE device call on the largest machine lent (2 GPUs this session: nvidia-h100-x2 / h200-x2;
# M = the GPUs visible, at most 4). Every phase has a time guard; the call ends by T+560 s. In order of what
# decides the next step:
#   1. ResNet-18 CIFAR whole-step graph at 1 and M GPUs: flat vs bucketed (25/8 MiB), with and without the
#      per-step buffer broadcast, collectives off (lock-step only), batch 512 (~160 s)
#   2. torch.compile + graph on 1 GPU with a cold inductor cache (start-up as a user meets it, ~50 s)
#   3. the GPU tests: compile loss curve (lr 0.02 + warm-up), bucketed vs flat, AdamW + compile (<= 170 s)
#   4. torch.compile + graph at M GPUs, flat with and without the buffer broadcast (~100 s)
#   5. torch.profiler traces (1 GPU flat, M GPUs flat, M GPUs bucketed 8 MiB) and their breakdown (~50 s)
# Back under $OUT: console.log (the caller's), gpu-tests.log, x.tgz (every run's JSON, traces, breakdown, smi).
#   set -o pipefail; bash benchmarks/gpu_round4_issue13.sh 2>&1 | tee $OUT/console.log
#   DRY_RUN=cpu PY=.venv/bin/python OUT=/tmp/r4 bash benchmarks/gpu_round4_issue13.sh   # command lines on CPU
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset TORCH_NCCL_BLOCKING_WAIT  # the bucketed reducer's Work.wait() must be a stream wait inside the graph
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/x"
PY=${PY:-python3}
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
before() { [ $(( $(date +%s) - T0 )) -lt "$1" ] || { el "skipped (time guard $1 s): $2"; false; }; }
DRY=${DRY_RUN:-}
if [ "$DRY" = cpu ]; then
  EXTRA="--device cpu --backend gloo --workload toy --model toy-cnn --train-size 2048 --test-size 256 --batch-size 16
         --step-mode eager --debug-reducer-in-eager --no-compile"
  TT="--scale 0.02 --warmup 2"; DRY_TIMEOUT=120; M=2
else
  EXTRA=""; TT=""; DRY_TIMEOUT=
  M=$(nvidia-smi -L | wc -l); [ "$M" -gt 4 ] && M=4
fi
tt() {  # tt NAME CONFIGS TIMEOUT_S [extra ddp-train flags]: benchmarks/train_throughput.py, one JSON per call
  local name=$1 only=$2 limit=${DRY_TIMEOUT:-$3}; shift 3
  $PY benchmarks/train_throughput.py --only "$only" $TT --timeout "$limit" --extra "$EXTRA $*" \
    --out "$OUT/x/$name.json" 2>&1 | grep -v '^|\|^$\|^{\|^}\|^ "'
}

el "machine: $M GPUs"
if [ -z "$DRY" ]; then
  nvidia-smi -L; nvidia-smi topo -m > "$OUT/x/topo.txt" 2>&1
  nvidia-smi --query-gpu=timestamp,index,temperature.gpu,clocks.sm,power.draw,utilization.gpu,clocks_throttle_reasons.active \
    --format=csv -l 2 > "$OUT/x/smi.csv" 2>&1 &
  SMI=$!
fi
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count(),
'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else '-')"

el "1. ResNet-18 graph at 1 and $M GPUs: flat, no buffer broadcast, bucketed 25/8 MiB, collectives off, batch 512"
tt ab r18-graph-1,r18-graph-$M,r18-graphnobb-$M,r18-graphbk-$M,r18-graphbk8-$M,r18-graphbk8nobb-$M,r18-graphskip-$M,r18-graph512-1,r18-graph512-$M 45

el "2. torch.compile + graph, 1 GPU, cold inductor cache"
before 250 "compile 1 GPU" && tt compile1 r18-graphc-1 90

el "3. GPU tests"
if [ -n "$DRY" ] || before 330 "GPU tests"; then
  timeout -k 5 170 $PY -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py \
    -k "compile_loss_curve or bucketed or adamw_and_compile" 2>&1 | tail -40 > "$OUT/gpu-tests.log"
  cat "$OUT/gpu-tests.log"
fi

el "4. torch.compile + graph at $M GPUs: flat, and without the buffer broadcast"
before 470 "compile $M GPUs" && tt compileM r18-graphc-$M,r18-graphcnobb-$M 60

el "5. profiles: 10 replays, every rank"
before 500 "profile 1 GPU" && tt prof1 r18-graph-1 30 --profile-dir "$OUT/x/prof-1gpu-flat" --profile-steps 10
before 520 "profile $M GPUs flat" && tt profM r18-graph-$M 30 --profile-dir "$OUT/x/prof-${M}gpu-flat" --profile-steps 10
before 540 "profile $M GPUs bucketed" && tt profMb r18-graphbk8-$M 30 --profile-dir "$OUT/x/prof-${M}gpu-bk8" --profile-steps 10
ls -d "$OUT"/x/prof-* >/dev/null 2>&1 && \
  $PY benchmarks/trace_breakdown.py "$OUT"/x/prof-* --json "$OUT/x/breakdown.json" > "$OUT/x/breakdown.md" 2>&1

[ -n "${SMI:-}" ] && kill "$SMI" 2>/dev/null
el "summary"
$PY - "$OUT/x" <<'PY'
import glob, json, os, sys
print("| config | GPUs | img/s | step ms | util % | reducer/buckets | start-up s | train loss | error |")
print("|---|---|---|---|---|---|---|---|---|")
for f in ("ab", "compile1", "compileM"):
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
tar czf "$OUT/x.tgz" -C "$OUT" x && rm -rf "$OUT/x"
el "done"
ls -la "$OUT"
