#!/bin/bash
# device call 3 (issue 13): graph GPU tests, the DDP-reducer graph at 4 GPUs, and the committed `ddpctl bench`
# report (--repeat 3, time-budgeted) on the 4-GPU machine. Run from anywhere: bash benchmarks/bench_report_issue13.sh (OUT=dir for the results)
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
el "GPU tests"
timeout -k 5 110 python3 -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py -k "auto or loss_curve or checkpoint_and_resume" 2>&1 | tail -30 > $OUT/gpu-tests.log; cat $OUT/gpu-tests.log
el "DDP-reducer graph, 4 GPUs"
python3 benchmarks/train_throughput.py --only r18-graphddp-4 --timeout 45 --out $OUT/graphddp.json
el "bench"
python3 - "$OUT/report" <<'PY'
import sys
from pathlib import Path
from ddpctl.bench import BenchOptions, run_bench
opts = BenchOptions(workloads=("cifar10-resnet18", "imagenet-synthetic-resnet50"), strategies=("single", "dp", "ddp"),
                    gpus=(1, 2, 4), pipelines=("gpu", "classic"), repeat=3, time_budget_s=385, cell_timeout_s=90,
                    probe_max_bytes=256 << 20)
run_bench(opts, Path(sys.argv[1]),
          command="ddpctl bench --gpus 1,2,4 --workloads cifar10-resnet18,imagenet-synthetic-resnet50 "
                  "--strategies single,dp,ddp --pipelines gpu,classic --repeat 3 --time-budget 385 --cell-timeout 90 "
                  "--probe-max 256m")
PY
rc=$?
el "bench done rc=$rc"
[[ -d $OUT/report/logs ]] && tar czf "$OUT/logs.tgz" -C "$OUT/report" logs && rm -rf "$OUT/report/logs"
ls $OUT $OUT/report
