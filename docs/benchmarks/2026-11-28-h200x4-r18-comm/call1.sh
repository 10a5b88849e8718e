# call 1 (nvidia-h200-x4): start-up anatomy of one ddp-train run; the gradient all-reduce alone; ResNet-18 at 1
# and 4 GPUs (defaults, bf16, the synchronisation alone, more NCCL channels); the reference (seed-style) pipeline.
set -x
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=docs/benchmarks/2026-11-28-h200x4-r18-comm
nvidia-smi topo -m > $OUT/topo.txt
stamp() { python3 -c "import sys,time; t=time.time(); [print(f'{time.time()-t:7.2f} {l}', end='') for l in sys.stdin]; print(f'{time.time()-t:7.2f} <end>')"; }
{ time python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; } 2> $OUT/startup.txt
python3 -X importtime -m ddp_train --help > /dev/null 2> $OUT/importtime.txt
python3 -m ddp_train --workload cifar10 --model resnet18 --strategy single --batch-size 256 --warmup-steps 30 \
  --max-steps 230 --epochs 1000 --no-eval --progress lines 2>&1 | stamp | grep -v '"event":"progress"' > $OUT/one-run-stamped.txt
torchrun --standalone --nproc-per-node 4 $D/allreduce_probe.py --out $OUT/ar-default.json 2>&1 | tail -30
NCCL_MIN_NCHANNELS=32 torchrun --standalone --nproc-per-node 4 $D/allreduce_probe.py --out $OUT/ar-minch32.json 2>&1 | tail -3
python3 benchmarks/train_throughput.py --workload r18 --gpus 1,4 --repeats 2 --variant base= \
  --variant bf16@4='--grad-compression bf16' --variant token@4='DDP_TRAIN_DEBUG_TOKEN_SYNC=1' \
  --variant minch32@4='NCCL_MIN_NCHANNELS=32' --out $OUT/r18.json
python3 benchmarks/train_throughput.py --workload classic --gpus 1,4 --repeats 1 --out $OUT/classic.json
cd $OUT && tar czf logs.tgz *-logs && rm -rf *-logs
