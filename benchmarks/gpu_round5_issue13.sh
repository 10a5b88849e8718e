#!/bin/bash
# Issue 13, round 5: ONE device call (2 GPUs this session; M = the GPUs visible, at most 4), ~7 min, guarded:
#   1. ResNet-18 graph at 1 and M GPUs after the reducers stopped accumulating into a zeroed flat buffer
#      (the backward's own gradients, one multi-tensor copy before the all-reduce): flat, bucketed 25/8 MiB,
#      collectives off (~100 s)
#   2. ddp-train's defaults on a long run (200 CIFAR epochs: the auto rule compiles it), 1 GPU, cold cache (~90 s)
#   3. torch.compile + graph at M GPUs: flat and bucketed 25 MiB (~70 s)
#   4. GPU tests of the reducers, checkpoints, auto (<= 170 s)
#   set -o pipefail; bash benchmarks/gpu_round5_issue13.sh 2>&1 | tee $OUT/console.log
#   DRY_RUN=cpu PY=.venv/bin/python OUT=/tmp/r5 bash benchmarks/gpu_round5_issue13.sh
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset TORCH_NCCL_BLOCKING_WAIT
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
  LONG="--device cpu --workload toy --model toy-cnn --train-size 2048 --batch-size 16"
  TT="--scale 0.02 --warmup 2"; DRY_TIMEOUT=120; M=2; LONG_S=10
else
  EXTRA=""; TT=""; DRY_TIMEOUT=; LONG=""; LONG_S=45
  M=$(nvidia-smi -L | wc -l); [ "$M" -gt 4 ] && M=4
fi
tt() {
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
$PY -c "import torch; print('torch', torch.__version__, torch.cuda.device_count(), 'nccl',
torch.cuda.nccl.version() if torch.cuda.is_available() else '-')"

el "1. ResNet-18 graph at 1 and $M GPUs: flat, bucketed 25/8 MiB, collectives off"
tt ab r18-graph-1,r18-graph-$M,r18-graphbk-$M,r18-graphbk8-$M,r18-graphskip-$M 45

el "2. defaults on a 200-epoch run, 1 GPU (cold inductor cache)"
before 200 "long run" && timeout -k 5 150 $PY benchmarks/default_long_run.py --gpus 1 --seconds $LONG_S \
  --extra "$LONG" --out "$OUT/x/long1.json"

el "3. torch.compile + graph at $M GPUs: flat, bucketed 25 MiB"
before 320 "compile $M GPUs" && tt compileM r18-graphc-$M,r18-graphcbk-$M 60

el "4. GPU tests"
if [ -n "$DRY" ] || before 400 "GPU tests"; then
  timeout -k 5 170 $PY -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py \
    -k "bucketed or bf16_all_reduce or checkpoint_and_resume or planted_divergence or auto_picks or deferred" 2>&1 | tail -40 \
    > "$OUT/gpu-tests.log"
  cat "$OUT/gpu-tests.log"
fi
[ -n "${SMI:-}" ] && kill "$SMI" 2>/dev/null
el "summary"
$PY - "$OUT/x" <<'PY'
import json, os, sys
print("| config | GPUs | img/s | step ms | util % | reducer/buckets | start-up s | train loss | error |")
print("|---|---|---|---|---|---|---|---|---|")
for f in ("ab", "compileM"):
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
tar czf "$OUT/x.tgz" -C "$OUT" x && rm -rf "$OUT/x"
el "done"
