# call 2 (nvidia-h200-x4): the last runs of the 4x H200 bench report (docs/benchmarks/2026-11-28-h200x4-forecast,
# `--resume`, the first call's options), then the GPU tests of the reducers, compression and the compute probe.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
REPO=$PWD
rm -rf /tmp/bench && mkdir -p /tmp/bench && cp -r docs/benchmarks/2026-11-28-h200x4-forecast /tmp/bench/h200x4
(cd /tmp/bench && timeout 420 python3 -m ddpctl bench --resume h200x4 --workloads cifar10-resnet18,imagenet-synthetic-resnet50 \
  --pipelines device,classic --links local,socket --repeat 3 --cell-timeout 150 --probe-max 256m --time-budget 330 \
  > $OUT/call3-console.log 2>&1; echo "bench exit $?"; tail -5 $OUT/call3-console.log)
(cd /tmp/bench && tar czf $OUT/h200x4.tgz h200x4)
timeout 170 python3 -m pytest -q -p no:randomly tests/distributed/test_ddp_train_gpu.py -rA \
  -k "bucketed_reducer_matches or deferred or compressed_loss or auto_compresses or compute_probe" > $OUT/gpu-tests.log 2>&1
echo "tests exit $?"; grep -E "PASSED|FAILED|ERROR|passed|failed" $OUT/gpu-tests.log | tail -12
