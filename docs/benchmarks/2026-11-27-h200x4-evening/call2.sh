#!/bin/bash
# device call 2: the ResNet-18 DataParallel cells at 4 GPUs with 3 repeats; ResNet-18 at 4 GPUs: NCCL graph mixing off, profiles
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L > $OUT/smi.txt; git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
echo "start $(date -u +%FT%TZ)"
timeout 250 python3 -m ddpctl bench --workloads cifar10-resnet18 --strategies single,dp --gpus 1,4 --pipelines device --repeat 3 --cell-timeout 90 --no-probe --time-budget 215 -o $OUT/dp > $OUT/dp.log 2>&1
echo "dp rc=$? at ${SECONDS}s"; grep -E "^\| cifar" $OUT/dp/report.md | cut -c1-160; grep -A4 "Failures" $OUT/dp/report.md
G='--step-mode graph'
V=(--variant base="$G" --variant mix0@4="NCCL_GRAPH_MIXING_SUPPORT=0 $G"
   --variant mix0bkbf@4="NCCL_GRAPH_MIXING_SUPPORT=0 $G --graph-reducer bucketed --grad-compression bf16"
   --variant mix0bf@4="NCCL_GRAPH_MIXING_SUPPORT=0 $G --grad-compression bf16")
timeout $(( 470 - SECONDS )) python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 "${V[@]}" --repeats 2 --steps 600 --timeout 60 --out $OUT/x/mix.json > $OUT/mix.log 2>&1
echo "mix rc=$? at ${SECONDS}s"; grep -v "^$" $OUT/mix.log | tail -12
timeout 45 python3 benchmarks/train_throughput.py --workload r18 --gpus 1 --variant p1="$G --profile-dir $OUT/x/prof1 --profile-steps 20" --repeats 1 --steps 200 --timeout 40 --out $OUT/x/p1.json > $OUT/p1.log 2>&1
timeout 60 python3 benchmarks/train_throughput.py --workload r18 --gpus 4 --variant p4="$G --profile-dir $OUT/x/prof4 --profile-steps 20" --repeats 1 --steps 200 --timeout 55 --out $OUT/x/p4.json > $OUT/p4.log 2>&1
echo "profiles at ${SECONDS}s"
timeout $(( 585 - SECONDS )) python3 benchmarks/trace_breakdown.py $OUT/x/prof1 $OUT/x/prof4 --json $OUT/breakdown.json > $OUT/breakdown.md 2>&1; cat $OUT/breakdown.md
tar czf $OUT/logs.tgz -C $OUT x dp/logs 2>/dev/null; rm -rf $OUT/x $OUT/dp/logs
echo "end $(date -u +%FT%TZ) ${SECONDS}s"
