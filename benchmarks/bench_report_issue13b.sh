#!/bin/bash
# Issue 13, second round, device call 2 (4 GPUs): torch.compile + whole-step graph (cold start-up, 1 and 4 GPUs)
# against the graph alone on the same machine, the GPU tests of the fast mode (compile loss curve, bf16 all-reduce,
# checkpoint/resume, auto), then the committed `ddpctl bench` report (classic cell with the seeds' dataset,
# ResNet-50 cells in graph mode), time-budgeted. GPU temperatures and clocks are sampled throughout (smi.csv).
#   bash benchmarks/bench_report_issue13b.sh     (OUT=dir for the results; default /tmp/out)
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
before() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }
nvidia-smi -L
nvidia-smi --query-gpu=timestamp,index,temperature.gpu,clocks.sm,power.draw,utilization.gpu,clocks_throttle_reasons.active \
  --format=csv -l 2 > $OUT/smi.csv 2>&1 &
SMI=$!
el "compile + graph, 1 GPU (cold inductor cache), graph alone, compile + graph on 4 GPUs (warm cache)"
python3 benchmarks/train_throughput.py --only r18-graphc-1,r18-graph-1,r18-graphc-4,r18-graph-4 --timeout 130 \
  --out $OUT/compile.json 2>&1 | grep -v "^$\|^{\|^}\|^ \""
el "GPU tests"
before 260 && timeout -k 5 170 python3 -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py \
  -k "compile_loss_curve or bf16_all_reduce or checkpoint_and_resume or auto_picks" 2>&1 | tail -25 > $OUT/gpu-tests.log
cat $OUT/gpu-tests.log
el "bench"
LEFT=$(( 575 - ($(date +%s) - T0) ))
python3 - "$OUT/report" "$LEFT" <<'PY'
import sys
from pathlib import Path
from ddpctl.bench import BenchOptions, run_bench
budget = max(60, int(sys.argv[2]))
opts = BenchOptions(workloads=("cifar10-resnet18", "imagenet-synthetic-resnet50"), strategies=("single", "ddp"),
                    gpus=(1, 2, 4), pipelines=("gpu", "classic"), repeat=3, time_budget_s=budget, cell_timeout_s=60,
                    probe_max_bytes=256 << 20)
run_bench(opts, Path(sys.argv[1]),
          command="ddpctl bench --gpus 1,2,4 --workloads cifar10-resnet18,imagenet-synthetic-resnet50 "
                  f"--strategies single,ddp --pipelines gpu,classic --repeat 3 --time-budget {budget} --cell-timeout 60 "
                  "--probe-max 256m")
PY
el "bench done rc=$?"
kill $SMI
[[ -d $OUT/report/logs ]] && tar czf "$OUT/logs.tgz" -C "$OUT/report" logs && rm -rf "$OUT/report/logs"
ls $OUT $OUT/report
