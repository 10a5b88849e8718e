# call 2 (nvidia-h200-x4): the bf16 gradients cast straight into the bf16 buffer, and auto choosing bf16 flat on
# a fast link for a short bf16 step: ResNet-18 at 1, 2 and 4 GPUs with the defaults against fp32 forced (the old
# default); then the GPU tests of compression and the flat/bucketed reducers.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,2,4 --repeats 2 --variant base= \
  --variant fp32@2,4='--grad-compression none' --out $OUT/r18.json
python3 -c "import json; d=json.load(open('$OUT/r18.json')); [print(r['variant'], r['gpus'], r['tag'], (r['summary'] or {}).get('grad_compression'), (r['summary'] or {}).get('graph_reducer'), (r['summary'] or {}).get('predicted_efficiency'), (r['summary'] or {}).get('comm_reason')) for r in d['runs']]"
timeout 280 python3 -m pytest -q -p no:randomly tests/distributed/test_ddp_train_gpu.py \
  -k "compress or bf16 or auto_compresses" 2>&1 | tail -15
cd $OUT && tar czf logs.tgz *-logs && rm -rf *-logs
