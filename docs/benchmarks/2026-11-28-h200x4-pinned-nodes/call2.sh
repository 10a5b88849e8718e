# call 2 (nvidia-h200-x2, the 4-GPU kind no longer lent): the same question interleaved run by run: ResNet-18 at
# 2 nodes x 1 GPU over sockets, one bench call per run (--repeat 1, no probe), shared CPUs and pinned halves
# (pin_nodes.diff applied for this call only) alternating, three of each.
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="--workloads cifar10-resnet18 --pipelines device --strategies ddp --gpus 2 --links socket --repeat 1 --cell-timeout 90 --no-probe --no-plots"
for i in 1 2 3; do
  for mode in shared pinned; do
    [ $mode = pinned ] && export DDPCTL_BENCH_PIN_NODES=1 || unset DDPCTL_BENCH_PIN_NODES
    timeout 100 python3 -m ddpctl bench -o /tmp/$mode-$i $O > $OUT/x2-$mode-$i.log 2>&1
    python3 -c "
import json; r=json.load(open('/tmp/$mode-$i/report.json')); x=r['cells'][0]['runs'][0]
print('$mode', $i, round(x['images_per_sec'] or 0), x.get('link_busbw_gbps'), x.get('step_time_s'))" | tee -a $OUT/x2-runs.txt
  done
done
nproc >> $OUT/x2-runs.txt
