# call 3 (nvidia-h200-x4): all of tests/distributed/test_ddp_train_gpu.py on the code of this session's start
# (74f543b: the experiments of calls 1 and 2 reverted), two pytest processes at once on GPU pairs 0,1 and 2,3.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T=tests/distributed/test_ddp_train_gpu.py
A="test_one_gpu_nccl_fast_path_converges or test_two_gpus_nccl_sync_check_passes_and_converges or test_two_gpus_sync_bn_and_dataloader_pipeline or test_two_gpus_manual_tcp_planted_divergence_is_caught or test_two_gpus_stop_resume_bit_identical or test_auto_picks_the_graph or test_one_gpu_graph_loss_curve_matches_eager or test_two_gpus_graph_sync_check_checkpoint_and_resume or test_two_gpus_graph_catches_planted_divergence or test_two_gpus_graph_bucketed_reducer_matches_flat or test_two_gpus_graph_deferred"
(CUDA_VISIBLE_DEVICES=0,1 timeout 450 python3 -m pytest -q -p no:cacheprovider -p no:randomly -rA --durations=20 $T -k "$A" > $OUT/gpu-tests-pair01.log 2>&1; echo "rc=$?" >> $OUT/gpu-tests-pair01.log) &
(CUDA_VISIBLE_DEVICES=2,3 timeout 450 python3 -m pytest -q -p no:cacheprovider -p no:randomly -rA --durations=20 $T -k "not ($A)" > $OUT/gpu-tests-pair23.log 2>&1; echo "rc=$?" >> $OUT/gpu-tests-pair23.log) &
wait
grep -E "^(PASSED|FAILED|ERROR)|passed|failed|rc=" $OUT/gpu-tests-pair01.log $OUT/gpu-tests-pair23.log
