#!/bin/bash
# device call 1: GPU tests on two GPU pairs at once, then ResNet-18 4-GPU variants
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L > $OUT/smi.txt; nvidia-smi topo -m >> $OUT/smi.txt
T=tests/distributed/test_ddp_train_gpu.py
A="test_one_gpu_nccl_fast_path_converges or test_two_gpus_nccl_sync_check_passes_and_converges or test_two_gpus_sync_bn_and_dataloader_pipeline or test_two_gpus_manual_tcp_planted_divergence_is_caught or test_two_gpus_stop_resume_bit_identical or test_auto_picks_the_graph or test_one_gpu_graph_loss_curve_matches_eager or test_two_gpus_graph_sync_check_checkpoint_and_resume or test_two_gpus_graph_catches_planted_divergence or test_two_gpus_graph_bucketed_reducer_matches_flat or test_two_gpus_graph_deferred"
(CUDA_VISIBLE_DEVICES=0,1 timeout 420 python3 -m pytest -q -p no:cacheprovider -rA --durations=20 $T -k "$A" > $OUT/tests-a.log 2>&1; echo "rc=$?" >> $OUT/tests-a.log) &
(CUDA_VISIBLE_DEVICES=2,3 timeout 420 python3 -m pytest -q -p no:cacheprovider -rA --durations=20 $T -k "not ($A)" > $OUT/tests-b.log 2>&1; echo "rc=$?" >> $OUT/tests-b.log) &
wait
tail -3 $OUT/tests-a.log $OUT/tests-b.log
if grep -q "FAILED.*compile_loss_curve" $OUT/tests-b.log; then
  (cd <a checkout of 273ca8e> && PYTHONPATH=$PWD/src timeout 200 python3 -m pytest -q -p no:cacheprovider -rA tests/distributed/test_ddp_train_gpu.py -k compile_loss_curve > $OUT/tests-old-compile.log 2>&1; tail -3 $OUT/tests-old-compile.log)
fi
left=$(( 575 - SECONDS ))
echo "tests done at ${SECONDS}s, ${left}s left"
V=(--variant base='--step-mode graph' --variant bf16@4='--step-mode graph --grad-compression bf16'
   --variant bk@4='--step-mode graph --graph-reducer bucketed'
   --variant bkch8@4='NCCL_MAX_NCHANNELS=8 --step-mode graph --graph-reducer bucketed'
   --variant bkch4@4='NCCL_MAX_NCHANNELS=4 --step-mode graph --graph-reducer bucketed'
   --variant bkbf@4='--step-mode graph --graph-reducer bucketed --grad-compression bf16'
   --variant flatch8@4='NCCL_MAX_NCHANNELS=8 --step-mode graph')
timeout $left python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 "${V[@]}" --repeats 1 --steps 600 --timeout 90 --out $OUT/r18v/r18v.json > $OUT/r18v.log 2>&1
cat $OUT/r18v.log | grep -v "^$"
tar czf $OUT/r18v-logs.tgz -C $OUT r18v 2>/dev/null; rm -rf $OUT/r18v/r18v-logs
