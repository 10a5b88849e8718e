# call 1 (nvidia-h200-x4): the bucketed reducer's overlapped buckets on a second NCCL communicator limited to a
# few CTAs (an experiment: DDP_TRAIN_OVERLAP_CTAS, overlap_ctas.diff here, applied for this call only; the last
# bucket on the default one),
# ResNet-18 at 1 and 4 GPUs against the defaults (flat, bf16) and the plain bucketed reducer, runs interleaved.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import torch.distributed as d; c=d.ProcessGroupNCCL.Options().config; print('config', [a for a in dir(c) if not a.startswith('_')])"
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --repeats 2 --variant base= \
  --variant bk@4='--graph-reducer bucketed --grad-compression bf16' \
  --variant bkc8@4='DDP_TRAIN_OVERLAP_CTAS=8 --graph-reducer bucketed --grad-compression bf16' \
  --variant bkc4@4='DDP_TRAIN_OVERLAP_CTAS=4 --graph-reducer bucketed --grad-compression bf16' \
  --variant bkc8b16@4='DDP_TRAIN_OVERLAP_CTAS=8 --graph-reducer bucketed --grad-compression bf16 --bucket-mb 16' \
  --out $OUT/r18.json 2>&1 | tail -30
cd $OUT && tar czf logs.tgz *-logs 2>/dev/null; rm -rf *-logs; ls
