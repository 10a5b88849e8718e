#!/bin/bash
# device call 2: where ResNet-18's 4-GPU overhead comes from; progress-record overhead
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L > $OUT/smi.txt
G='--step-mode graph'
V=(--variant base="$G" --variant skip@4="$G --debug-skip-grad-sync" --variant nobb@4="$G --no-broadcast-buffers"
   --variant big="$G --train-size 200000")
timeout 200 python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 "${V[@]}" --repeats 1 --steps 600 --timeout 60 --out $OUT/diag/diag.json > $OUT/diag.log 2>&1
grep -v "^$" $OUT/diag.log | tail -14
# four independent 1-GPU runs at once: does the machine slow each GPU when all four work?
for i in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$i PYTHONPATH=$PWD/src timeout 60 python3 -m ddp_train --workload cifar10 --model resnet18 --batch-size 256 --no-eval --sync-check off --quiet --step-mode graph --epochs 1000 --warmup-steps 40 --max-steps 640 --log-interval 1000000 --strategy single > $OUT/diag/solo$i.log 2>&1 &
done; wait
for i in 0 1 2 3; do echo "solo gpu$i: $(tail -1 $OUT/diag/solo$i.log | grep -o '"images_per_sec": [0-9.]*')"; done
echo "diag done at ${SECONDS}s"
timeout $(( 560 - SECONDS )) python3 benchmarks/train_throughput.py --workload r18 --gpus 1 --variant graph="$G" --variant graph4@4="$G" --variant eager="--step-mode eager" --progress-overhead --repeats 2 --steps 600 --timeout 60 --out $OUT/po/progress_overhead.json > $OUT/po.log 2>&1
grep -v "^$" $OUT/po.log | tail -20
tar czf $OUT/logs.tgz -C $OUT diag po 2>/dev/null; rm -rf $OUT/diag/*-logs $OUT/diag/solo* $OUT/po/*-logs
