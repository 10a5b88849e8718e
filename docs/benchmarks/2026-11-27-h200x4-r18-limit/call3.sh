#!/bin/bash
# device call 3: ResNet-18 at 4 GPUs, NCCL protocol/algorithm and bucketed-bf16 variants; the best one confirmed
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
G='--step-mode graph'
V=(--variant base="$G" --variant ll128@4="NCCL_PROTO=LL128 $G" --variant simple@4="NCCL_PROTO=Simple $G"
   --variant tree@4="NCCL_ALGO=Tree $G" --variant bkbf@4="$G --graph-reducer bucketed --grad-compression bf16"
   --variant bkbf8@4="$G --graph-reducer bucketed --grad-compression bf16 --bucket-mb 8"
   --variant bkbfll@4="NCCL_PROTO=LL128 $G --graph-reducer bucketed --grad-compression bf16"
   --variant bk8@4="$G --graph-reducer bucketed --bucket-mb 8")
timeout 260 python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 "${V[@]}" --repeats 1 --steps 600 --timeout 60 --out $OUT/x/explore.json > $OUT/explore.log 2>&1
grep -v "^$" $OUT/explore.log | tail -11
best=$(python3 -c "
import json; d=json.load(open('$OUT/x/explore.json'))
r=max((r for r in d['rows'] if r['gpus']==4 and r['median']), key=lambda r: r['median'])
print(r['variant'])")
spec=$(printf '%s\n' "${V[@]}" | grep "^${best}@4=" | head -1)
echo "best: $best ($spec); confirming at ${SECONDS}s"
timeout $(( 560 - SECONDS )) python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --variant base="$G" --variant "$spec" --repeats 2 --steps 600 --timeout 60 --out $OUT/x/confirm.json > $OUT/confirm.log 2>&1
grep -v "^$" $OUT/confirm.log | tail -6
tar czf $OUT/logs.tgz -C $OUT x; rm -rf $OUT/x/*-logs
