# call 3 (nvidia-h200-x4): the GPU tests of the reducers, compression and the compute probe (the bucketed-vs-flat
# test now fp32 on both sides; the auto test also reads link_busbw_gbps), then the last run of the 4x H200 bench
# report (`--resume`, the first call's options).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 330 python3 -m pytest -q -p no:randomly tests/distributed/test_ddp_train_gpu.py -rA --durations=0 \
  -k "bucketed_reducer_matches or deferred or compressed_loss or auto_compresses or compute_probe" > $OUT/gpu-tests.log 2>&1
echo "tests exit $?"; grep -E "^(PASSED|FAILED|ERROR)|passed|failed|s call" $OUT/gpu-tests.log | tail -16
rm -rf /tmp/bench && mkdir -p /tmp/bench && cp -r docs/benchmarks/2026-11-28-h200x4-forecast /tmp/bench/h200x4
(cd /tmp/bench && timeout 150 python3 -m ddpctl bench --resume h200x4 --workloads cifar10-resnet18,imagenet-synthetic-resnet50 \
  --pipelines device,classic --links local,socket --repeat 3 --cell-timeout 150 --probe-max 256m --time-budget 100 \
  > $OUT/call4-console.log 2>&1; echo "bench exit $?"; tail -3 $OUT/call4-console.log)
(cd /tmp/bench && tar czf $OUT/h200x4.tgz h200x4)
