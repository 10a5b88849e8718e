#!/bin/bash
# Issue 13, second round, device call 1 (4 GPUs): what limits ResNet-18 scaling in graph mode (bf16 all-reduce,
# no all-reduce at all, four independent 1-GPU runs at once, NCCL CTA counts, batch 512), torch.compile + graph,
# ResNet-50 in graph mode (flat fp32 / bf16 / DDP reducer), the classic cell with the seeds' torchvision-style
# dataset against the one before. Every run is benchmarks/train_throughput.py (a real ddp-train run); each step
# runs only while the elapsed time is under its bound, so the whole stays inside one 600 s call.
#   bash benchmarks/perf_explore_issue13.sh      (OUT=dir for the results; default /tmp/out)
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/x
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
before() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }
tt() { local name=$1; shift; python3 benchmarks/train_throughput.py --out $OUT/x/$name.json "$@" 2>&1 | grep -v "^|\|^$\|^{\|^}\|^ \"" ; }
nvidia-smi -L; nvidia-smi topo -m > $OUT/x/topo.txt 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/x/smi-start.csv
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'torchvision', torchvision.__version__)"

el "R18 graph: 1 GPU baseline, 4 GPUs fp32 / bf16 / no all-reduce, 2 GPUs fp32 / bf16"
tt a --only r18-graph-1,r18-graph-4,r18-graphbf-4,r18-graphskip-4,r18-graph-2,r18-graphbf-2 --timeout 45

el "four independent 1-GPU graph runs at once (no NCCL): the machine's own cost of four busy GPUs"
for i in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$i python3 -m ddp_train --workload cifar10 --model resnet18 --batch-size 256 --no-eval \
    --sync-check off --quiet --step-mode graph --strategy single --epochs 1000 --warmup-steps 40 --max-steps 440 \
    --log-interval 1000000 > $OUT/x/concurrent-$i.json 2> $OUT/x/concurrent-$i.err &
done
wait
for i in 0 1 2 3; do tail -1 $OUT/x/concurrent-$i.json | python3 -c "import json,sys; s=json.loads(sys.stdin.read()); print('concurrent gpu$i', s['images_per_sec'], s['step_time_s'], s['gpu_util'])" || tail -3 $OUT/x/concurrent-$i.err; done

el "NCCL CTAs (flat all-reduce, not overlapped: more CTAs, faster collective?)"
NCCL_MIN_CTAS=32 tt ctas32 --only r18-graph-4,r18-graphbf-4 --timeout 45
NCCL_MAX_CTAS=4 tt ctas4 --only r18-graph-4 --timeout 45

el "ResNet-50 graph: 1 GPU eager and graph, 4 GPUs flat fp32 / bf16 / DDP reducer / no all-reduce"
before 250 && tt r50 --only r50-eager-1,r50-graph-1,r50-graph-4,r50-graphbf-4,r50-graphddp-4,r50-graphskip-4 --timeout 60

el "classic cell: the seeds' torchvision-style dataset (new) vs the seeded per-sample pipeline (before)"
before 330 && tt classic --only classic-1,classicold-1,classic-4 --timeout 45

el "batch 512 per GPU (a reported variant)"
before 380 && tt b512 --only r18-graph512-1,r18-graph512-4,r18-graph512bf-4 --timeout 45

el "torch.compile + whole-step graph: 1 GPU (start-up and img/s), then 4 GPUs (inductor cache warm)"
before 420 && tt compile1 --only r18-graphc-1 --timeout 150
before 500 && tt compile4 --only r18-graphc-4,r18-graphcbf-4 --timeout 45
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $OUT/x/smi-end.csv
el "summary"
python3 - $OUT/x <<'PY'
import glob, json, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try:
        doc = json.load(open(f))
    except Exception:
        continue
    for r in doc.get("results", []) if isinstance(doc, dict) else []:
        s = r.get("summary") or {}
        rows.append((f.rsplit("/", 1)[1][:-5], r["name"], s.get("images_per_sec"), s.get("step_time_s"),
                     s.get("gpu_util"), s.get("startup_s"), s.get("train_loss"), (r.get("error") or "")[-160:]))
print("| file | config | img/s | step ms | util | startup s | train loss | error |")
for f, n, ips, st, u, su, tl, e in rows:
    print(f"| {f} | {n} | {ips} | {round(st * 1000, 3) if st else ''} | {u} | {su} | {tl} | {e} |")
PY
tar czf $OUT/explore.tgz -C $OUT x && rm -rf $OUT/x
el "done"
