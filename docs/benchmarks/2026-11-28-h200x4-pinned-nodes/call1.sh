# call 1 (nvidia-h200-x4): the two-node socket emulation's ResNet-18 cells (2 x 1, 2 x 2 GPUs, 3 repeats) as
# ddpctl bench runs them, then the same with each emulated node's torchrun pinned to its own half of the host's
# CPUs (an experiment: DDPCTL_BENCH_PIN_NODES=1, pin_nodes.diff here, applied for this call only). The question:
# does the loopback link's run-to-run spread (4.8-9.8 GB/s in the committed 4x H200 report) come from the two
# emulated nodes sharing CPUs?
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="--workloads cifar10-resnet18 --pipelines device --strategies ddp --gpus 2,4 --links socket --repeat 3 --cell-timeout 120 --probe-max 64m --time-budget 250 --no-plots"
python3 -m ddpctl bench -o /tmp/shared $O > $OUT/shared.log 2>&1; echo "shared exit $?"
DDPCTL_BENCH_PIN_NODES=1 python3 -m ddpctl bench -o /tmp/pinned $O > $OUT/pinned.log 2>&1; echo "pinned exit $?"
for d in shared pinned; do cp /tmp/$d/report.json $OUT/$d-report.json; python3 - $d <<'PY'
import json, sys
r = json.load(open(f"/tmp/{sys.argv[1]}/report.json"))
for c in r["cells"]:
    runs = [(round(x["images_per_sec"] or 0), x.get("link_busbw_gbps"), x.get("error")) for x in c.get("runs") or []]
    print(sys.argv[1], c["key"], runs)
for p in r.get("interconnect") or []:
    print(sys.argv[1], "probe", p.get("link"), p.get("world_size"), [round(x["busbw_gbps"], 1) for x in p.get("results") or []][-3:])
PY
done
