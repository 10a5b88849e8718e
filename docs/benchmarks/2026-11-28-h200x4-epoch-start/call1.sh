# call 1 (nvidia-h200-x4): the device pipeline dealing the next epoch's indices during an epoch's first step
# (commit 8776f1a) against the pipeline before it (8776f1a~1's pipeline_device.py, copied into a copy of src/ as
# scratch/pipeline_device_before.py: `git show 8776f1a~1:src/ddp_train/data/pipeline_device.py`, not committed), ResNet-18 at 1 and 4 GPUs, runs interleaved; then the GPU tests.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf /tmp/before_src && cp -r src /tmp/before_src && cp scratch/pipeline_device_before.py /tmp/before_src/ddp_train/data/pipeline_device.py
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --repeats 3 --variant dealt-ahead= \
  --variant before='PYTHONPATH=/tmp/before_src' --out $OUT/r18.json 2>&1 | tail -30   # committed as call1-r18.json, its logs as call1-logs.tgz
timeout 230 python3 -m pytest -q -p no:randomly tests/distributed/test_ddp_train_gpu.py 2>&1 | tail -25
cd $OUT && tar czf logs.tgz *-logs 2>/dev/null; rm -rf *-logs; ls
