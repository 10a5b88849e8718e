#!/bin/bash
# device call 2 (issue 13): the flat-all-reduce graph on 2 and 4 GPUs, where the DDP-reducer graph hangs
# (stack dump), the graph GPU tests, the classic cell. Run from anywhere: bash benchmarks/graph_explore_issue13.sh
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
el "flat graph 2, 4 GPUs; classic 1, 4"
python3 benchmarks/train_throughput.py --only r18-graph-2,r18-graph-4,r18-graph-1,classic-1,classic-4 --timeout 60 --out $OUT/explore2-a.json
el "DDP-reducer graph, 2 GPUs, stack dump after 35 s"
HANG_S=35 timeout -k 5 50 python3 -m torch.distributed.run --standalone --nproc-per-node 2 benchmarks/hangdump.py --workload cifar10 \
  --batch-size 256 --no-eval --sync-check off --epochs 100 --max-steps 60 --log-interval 5 --step-mode graph \
  --graph-reducer ddp > $OUT/ddp-graph-hang.log 2>&1
grep -v "^\s*$" $OUT/ddp-graph-hang.log | grep -E "Thread|File|step|error|Error|Timeout" | head -60
el "GPU tests (graph)"
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/distributed/test_ddp_train_gpu.py -k "(graph or auto) and not compile" 2>&1 | tail -30 > $OUT/gpu-tests.log; cat $OUT/gpu-tests.log
if [ $(( $(date +%s) - T0 )) -lt 250 ]; then
  el "compile + graph, 1 GPU"
  python3 benchmarks/train_throughput.py --only r18-graphc-1 --timeout 130 --out $OUT/explore2-b.json
fi
el "done"
