#!/usr/bin/env bash
# The `ddpctl bench` report on a GPU machine without ddpctl installed and without internet (the lent
# H100/H200 machines): run from a copy of the repository's src/ with pure-Python wheels for the CLI's
# dependencies beside it (see docs/bench.md). Writes OUT/report/{report.md,report.json,*.png} and
# OUT/logs.tgz (every run's full output).
#
#   usage: benchmarks/bench_report_gpu.sh OUT [WHEEL_DIR] [-- extra ddpctl bench flags]
set -uo pipefail
OUT=${1:?usage: bench_report_gpu.sh OUT [WHEEL_DIR]}
WHL=${2:-whl}
shift 2 || shift $#
[[ ${1:-} == "--" ]] && shift
HERE=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi -L || true
if compgen -G "$WHL/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHL"/*.whl \
    || echo "wheel install failed"
fi
export PYTHONPATH=/tmp/site:$HERE/src
python3 -c 'import torch, typer, matplotlib; print("torch", torch.__version__, "typer", typer.__version__, "gpus", torch.cuda.device_count())'
CLI=(python3 -c "import sys; sys.argv[0] = 'ddpctl'; from ddpctl.cli.main import main; main()")
mkdir -p "$OUT"
ARGS=(bench --gpus 1,2 --workloads cifar10-resnet18,imagenet-synthetic-resnet50 --strategies single,dp,ddp
      --pipelines gpu,dataloader -o "$OUT/report" "$@")
if "${CLI[@]}" --version >/dev/null 2>&1; then
  echo "+ ddpctl ${ARGS[*]}"
  "${CLI[@]}" "${ARGS[@]}"
else  # the CLI's dependencies did not import: the same run through the library
  echo "ddpctl CLI unavailable; running the library (ddpctl.bench.run_bench) with the same options"
  python3 - "$OUT/report" <<'PY'
import sys
from pathlib import Path
from ddpctl.bench import BenchOptions, run_bench
opts = BenchOptions(workloads=("cifar10-resnet18", "imagenet-synthetic-resnet50"), strategies=("single", "dp", "ddp"),
                    gpus=(1, 2), pipelines=("gpu", "dataloader"), time_budget_s=330, cell_timeout_s=150)
run_bench(opts, Path(sys.argv[1]), command="ddpctl bench (library) --gpus 1,2 ...")
PY
fi
rc=$?
[[ -d $OUT/report/logs ]] && tar czf "$OUT/logs.tgz" -C "$OUT/report" logs && rm -rf "$OUT/report/logs"
exit $rc
