# call 4 (nvidia-h200-x4): what the epoch boundaries cost ResNet-18: the default 50,000-sample epochs (48 steps at
# 4 GPUs, 195 at 1) against 200,000-sample ones (195 and 781 steps), 400 timed steps each, runs interleaved.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --repeats 2 --variant base= \
  --variant long-epochs='--train-size 200000' --out $OUT/r18-epochs.json 2>&1 | tail -12   # committed as call4-r18-epochs.json, logs as call4-logs.tgz
cd $OUT && tar czf logs-epochs.tgz *-logs && rm -rf *-logs
