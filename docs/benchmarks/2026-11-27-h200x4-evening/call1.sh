#!/bin/bash
# device call 1 of this session: the third repeats: ResNet-50 (NVLink + two nodes over sockets) and the ResNet-18 DataParallel cells
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L > $OUT/smi.txt; nvidia-smi topo -m > $OUT/topo.txt; git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
echo "start $(date -u +%FT%TZ)"
timeout 345 python3 -m ddpctl bench --workloads imagenet-synthetic-resnet50 --strategies single,ddp --gpus 1,4 --pipelines device --links local,socket --repeat 3 --cell-timeout 150 --probe-max 256m --time-budget 335 -o $OUT/network > $OUT/network.log 2>&1
echo "network rc=$? at ${SECONDS}s"; grep -E "^\| imagenet" $OUT/network/report.md | cut -c1-160; grep -A5 "Failures" $OUT/network/report.md
left=$(( 570 - SECONDS ))
timeout $left python3 -m ddpctl bench --workloads cifar10-resnet18 --strategies single,dp --gpus 1,2,4 --pipelines device --repeat 3 --cell-timeout 90 --no-probe --time-budget $(( left - 10 )) -o $OUT/dp > $OUT/dp.log 2>&1
echo "dp rc=$? at ${SECONDS}s"; grep -E "^\| cifar" $OUT/dp/report.md | cut -c1-160; grep -A5 "Failures" $OUT/dp/report.md
echo "end $(date -u +%FT%TZ)"
