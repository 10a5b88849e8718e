# call 2 (nvidia-h200-x4): the optimizer stepping each bucket's parameters as soon as that bucket's all-reduce is
# done (an experiment: DDP_TRAIN_BUCKET_STEP=1, bucket_step.diff here, applied for this call only), while the later buckets are still on the
# wire, against the defaults (flat, bf16) and the plain bucketed reducer; ResNet-18 at 1 and 4 GPUs, interleaved.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --repeats 3 --variant base= \
  --variant bk@4='--graph-reducer bucketed --grad-compression bf16' \
  --variant bkstep@4='DDP_TRAIN_BUCKET_STEP=1 --graph-reducer bucketed --grad-compression bf16' \
  --variant bkstep16@4='DDP_TRAIN_BUCKET_STEP=1 --graph-reducer bucketed --grad-compression bf16 --bucket-mb 16' \
  --out $OUT/r18.json 2>&1 | tail -16
cd $OUT && tar czf logs.tgz *-logs 2>/dev/null; rm -rf *-logs; ls
