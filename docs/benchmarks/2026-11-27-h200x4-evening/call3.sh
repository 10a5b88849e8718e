#!/bin/bash
# device call 3: the two-node emulation report (ResNet-50, NVLink and sockets, 3 repeats); ResNet-18 bench with
# NCCL graph mixing off + bf16 gradient all-reduce (opt-in), 3 repeats. Everything in one tarball (few files come back).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi -L > $R/smi.txt; nvidia-smi topo -m > $R/topo.txt
echo "start $(date -u +%FT%TZ)"
timeout 420 python3 -m ddpctl bench --workloads imagenet-synthetic-resnet50 --strategies single,ddp --gpus 1,4 --pipelines device --links local,socket --repeat 3 --cell-timeout 150 --probe-max 256m --time-budget 380 -o $R/network > $R/network.log 2>&1
echo "network rc=$? at ${SECONDS}s"; grep -E "^\| imagenet" $R/network/report.md | cut -c1-170; grep -A4 "^## Failures" $R/network/report.md; grep "busbw" $R/network/report.md | head -5
left=$(( 575 - SECONDS ))
if [ $left -gt 100 ]; then
  NCCL_GRAPH_MIXING_SUPPORT=0 timeout $left python3 -m ddpctl bench --workloads cifar10-resnet18 --strategies single,ddp --gpus 1,4 --pipelines device --repeat 3 --cell-timeout 60 --no-probe --train-arg=--grad-compression --train-arg=bf16 --time-budget $(( left - 25 )) -o $R/r18-mix0-bf16 > $R/r18.log 2>&1
  echo "r18 rc=$? at ${SECONDS}s"; grep -E "^\| cifar" $R/r18-mix0-bf16/report.md | cut -c1-170; grep -A4 "^## Failures" $R/r18-mix0-bf16/report.md
fi
tar czf $OUT/results.tgz -C $OUT r; rm -rf $R
echo "end $(date -u +%FT%TZ) ${SECONDS}s"
