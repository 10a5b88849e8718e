"""The command-line flags of ``ddp-train`` (argparse). Rules that relate flags to each other or to the run
(a launch, a step plan) are in ``config``."""

from __future__ import annotations

import argparse

from ddp_train.config.checkpoint_interval import parse_interval
from ddp_train.config.flag_types import (
    MAX_BUCKET_MB,
    MAX_LR,
    MAX_RANKS,
    MAX_SEED,
    WEEK_S,
    non_negative,
    non_negative_int,
    positive,
    ranged,
    timeout_seconds,
)
from ddp_train.errors import EXIT_USAGE, TrainError, exit_codes_help

WORKLOADS = ("toy", "mnist", "cifar10", "imagenet-synthetic")
MODELS = ("toy-cnn", "mnist-cnn", "resnet18", "pyramidnet", "resnet50")
# models with compile_units() (ddp_train.model.networks), which --compile-scope blocks compiles one by one
COMPILE_UNIT_MODELS = ("toy-cnn", "resnet18", "pyramidnet", "resnet50")
# auto step mode: the whole-step CUDA graph (warm-up + capture cost about a second) for runs at least this long
GRAPH_MIN_STEPS = 100

EPILOG = """\
examples:
  ddp-train                                   # quick synthetic toy run (torchrun env, or one process)
  torchrun --nproc-per-node 2 -m ddp_train --workload cifar10 --epochs 5 --output-dir out
  ddp-train --init-method tcp://10.0.0.1:29500 --rank 1 --world-size 2 --workload mnist
  ddp-train --workload cifar10 --data-dir /data/cifar-10-batches-py --resume auto --output-dir out
  ddp-train --workload imagenet-synthetic --warmup-steps 20 --max-steps 120 --no-eval
  ddp-train compare out/ckpt-00000100.pt other/ckpt-00000100.pt

checkpoint interval (--checkpoint-interval): STEPS, DURATION or STEPS,DURATION (whichever comes first)
  200          every 200 optimizer steps (multiples of 200, so a resumed run saves at the same steps)
  30s 5m 1h30m every 30 seconds / 5 minutes / 90 minutes of training (counted from the last save)
  500,10m      every 500 steps, and whenever 10 minutes passed since the last save
  off          only at epoch ends and at --max-steps (the default)

preemption: SIGTERM or SIGUSR1 -> all ranks stop at the same step boundary (agreed by a small all-reduce),
  save a checkpoint there (with --output-dir) and exit 143; run again with --resume auto to continue.

"""
EPILOG += exit_codes_help() + "\n"


class ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise TrainError(f"{message} (see `ddp-train --help`)", EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(
        prog="ddp-train",
        description="The shared DDP training entrypoint and standard multi-GPU test program. "
        "Runs under torchrun (env://), with a manual --init-method, or as one plain process.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("launch")
    g.add_argument("--strategy", choices=("ddp", "dp", "single"), default="ddp",
                   help="ddp: one process per GPU/CPU rank (default); dp: DataParallel in one process; single")
    g.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto", help="auto: nccl on GPU, gloo on CPU")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    g.add_argument("--init-method", default=None, help="tcp://HOST:PORT or file:///shared/path (default env://)")
    g.add_argument("--rank", type=non_negative(int, MAX_RANKS - 1), default=None,
                   help="this process's rank (manual launch)")
    g.add_argument("--world-size", type=positive(int, MAX_RANKS), default=None,
                   help="number of processes (manual launch)")
    g.add_argument("--local-rank", type=non_negative(int, MAX_RANKS - 1), default=None,
                   help="GPU index on this node (default: LOCAL_RANK, or rank modulo the GPU count)")
    g.add_argument("--connect-timeout", type=timeout_seconds, default=300.0,
                   help="seconds to wait for MASTER_ADDR:MASTER_PORT to open (default 300)")
    g.add_argument("--pg-timeout", type=timeout_seconds, default=600.0,
                   help="process-group (collective) timeout in seconds (default 600)")

    g = p.add_argument_group("workload and data")
    g.add_argument("--workload", choices=WORKLOADS, default="toy")
    g.add_argument("--model", choices=MODELS + ("torchvision-resnet18", "torchvision-resnet50"), default=None,
                   help="default: toy-cnn / mnist-cnn / resnet18 / resnet50 by workload; torchvision-* need torchvision")
    g.add_argument("--data-dir", default=None,
                   help="real data (CIFAR-10 python batches, MNIST idx files, .gz or not); default: synthetic")
    g.add_argument("--train-size", type=positive(int), default=None, help="synthetic training samples")
    g.add_argument("--test-size", type=positive(int), default=None, help="synthetic test samples")
    g.add_argument("--synthetic-pool", type=non_negative_int, default=None,
                   help="distinct synthetic images to hold (0: one per sample; imagenet-synthetic default 2048)")
    g.add_argument("--data-pipeline", choices=("auto", "device", "dataloader", "classic"), default="auto",
                   help="device: data held on the device as uint8, batched augmentation (default); "
                   "dataloader: per-sample CPU pipeline with workers (seeded); classic: the reference input "
                   "pipeline (torchvision-style dataset, PIL per-sample RandomCrop/Flip/ToTensor/Normalize, DataLoader "
                   "workers; the benchmarks' reference)")
    g.add_argument("--workers", type=non_negative_int, default=None,
                   help="DataLoader workers in the dataloader and classic pipelines (default 4 on GPU, 0 on CPU)")
    g.add_argument("--no-augment", action="store_true", help="no random crop/flip")

    g = p.add_argument_group("optimisation")
    g.add_argument("--epochs", type=positive(int), default=None)
    g.add_argument("--batch-size", type=positive(int), default=None, help="per-rank (per-GPU) batch size")
    g.add_argument("--lr", type=positive(float, MAX_LR), default=None)
    g.add_argument("--scale-lr", action="store_true", help="linear LR scaling: lr x global_batch / --lr-base-batch")
    g.add_argument("--lr-base-batch", type=positive(int), default=256)
    g.add_argument("--lr-schedule", choices=("cosine", "constant"), default="cosine")
    g.add_argument("--warmup-epochs", type=non_negative(float, 1_000_000), default=0.0,
                   help="linear LR warm-up length in epochs")
    g.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    g.add_argument("--momentum", type=ranged(float, 0, 1, high_open=True), default=0.9,
                   help="SGD momentum, in [0, 1) (Nesterov when > 0)")
    g.add_argument("--weight-decay", type=non_negative(float), default=5e-4)
    g.add_argument("--label-smoothing", type=ranged(float, 0, 1), default=0.0, help="in [0, 1]")
    g.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16"), default="auto",
                   help="autocast dtype (auto: bf16 on GPU, fp32 on CPU)")
    g.add_argument("--channels-last", dest="channels_last", action="store_true", default=None,
                   help="NHWC memory format (default on GPU)")
    g.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    g.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile the model (default: auto, see --compile-if-repaid; combines with --step-mode "
                   "graph: ResNet-18 CIFAR +25%% img/s on one H100 for ~25 s more start-up)")
    g.add_argument("--compile-if-repaid", action=argparse.BooleanOptionalAction, default=True,
                   help="without --compile/--no-compile: torch.compile a graph-mode run only if it plans at least "
                   "30,000 steps, the break-even of its ~30 s start-up against ~1 ms saved per step (ResNet-18 "
                   "CIFAR on H100; the first log line says which and why). Default on; --no-compile-if-repaid: "
                   "compile only with --compile")
    g.add_argument("--compile-mode", default="default",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                   help="torch.compile mode (reduce-overhead uses CUDA graphs to cut per-kernel launch cost)")
    g.add_argument("--compile-scope", choices=("model", "blocks"), default="model",
                   help="what --compile (or the auto rule, --compile-if-repaid) compiles: model (default): the whole model in one torch.compile; blocks: the stem, "
                   "every residual block and the head compiled one by one (" + ", ".join(COMPILE_UNIT_MODELS)
                   + "), so each block's backward is its own autograd node and --graph-reducer bucketed's all-"
                   "reduces start while the earlier blocks' backward still runs (with model, all gradients appear "
                   "at the end of one compiled backward: no overlap); checkpoints are the same either way")
    g.add_argument("--step-mode", choices=("auto", "eager", "graph"), default="auto",
                   help="graph: capture the whole training step (forward, backward, DDP all-reduce, optimizer) in "
                   "one CUDA graph and replay it; eager: run it op by op; auto (default): graph on a GPU for runs "
                   f"of at least {GRAPH_MIN_STEPS} steps where nothing rules it out, eager otherwise (the first "
                   "log line says which and why)")
    g.add_argument("--graph-reducer", choices=("auto", "flat", "bucketed", "ddp"), default="auto",
                   help="how graph mode averages gradients across ranks (auto, the default: flat on a fast link, bucketed "
                   "on a slow one, see --grad-compression): flat: one NCCL all-reduce of a flat "
                   "gradient buffer after the backward; rank 0's BatchNorm buffers broadcast outside the graph, only "
                   "before the steps whose buffers evaluation or the sync check read (the values DDP's per-forward "
                   "broadcast_buffers gives); bucketed: the same buffer in reverse parameter order, cut into "
                   "buckets of --bucket-mb, each all-reduced as soon as the backward has produced its gradients "
                   "(overlapping the rest of the backward); ddp: DistributedDataParallel built on a side stream with "
                   "static_graph=True, captured with its bucket hooks")
    g.add_argument("--bucket-mb", type=positive(float, MAX_BUCKET_MB), default=None,
                   help="gradient bucket size in MB (MiB) of eager DDP and --graph-reducer bucketed (default: 25, "
                   "DDP's bucket_cap_mb; on a slow link measured at start-up, buckets that take ~4 ms on it, "
                   "4 to 25 MB)")
    g.add_argument("--cudnn-benchmark", action=argparse.BooleanOptionalAction, default=None,
                   help="cuDNN autotuning (default: on for GPU runs except --strategy dp and --deterministic)")
    g.add_argument("--broadcast-buffers", action=argparse.BooleanOptionalAction, default=True,
                   help="every rank takes rank 0's buffers (BatchNorm running stats): DDP (eager runs, --graph-reducer "
                        "ddp) broadcasts them before every forward; graph mode's flat/bucketed reducers only before "
                        "the steps whose buffers evaluation or the sync check read, with the same values for every "
                        "reader; --no-broadcast-buffers: never, BN stats drift per rank")
    g.add_argument("--grad-compression", default="auto", choices=["auto", "none", "bf16", "powersgd"],
                   help="how gradients cross the link: bf16 (half the bytes: a DDP comm hook in eager mode, the "
                   "gradients cast into a bf16 buffer in graph mode), powersgd (torch's PowerSGD hook, rank 4, eager "
                   "steps only), none (fp32); auto (default): bf16 when the all-reduce measured at start-up is slow "
                   "(< 25 GB/s busbw: Ethernet, sockets) or, on a fast link, when a bf16 graph-mode step is short "
                   "enough that bf16 is predicted to gain a point over fp32; else none; CPU runs: none. The "
                   "first log line says which and why")
    g.add_argument("--static-graph", action="store_true",
                   help="DDP static_graph=True (the model's autograd graph is the same every step)")
    g.add_argument("--sync-bn", action="store_true", help="SyncBatchNorm across ranks (BN stats must then match)")
    g.add_argument("--seed", type=non_negative(int, MAX_SEED), default=0, help=f"0 to {MAX_SEED}")
    g.add_argument("--deterministic", action="store_true",
                   help="deterministic algorithms; a stopped and resumed run ends bit-identical to an uninterrupted one")
    g.add_argument("--max-steps", type=positive(int), default=None,
                   help="stop after this many optimizer steps in total (benchmarks, stop/resume)")
    g.add_argument("--warmup-steps", type=non_negative_int, default=None,
                   help="steps excluded from the throughput figures (default: 5, fewer for short runs)")
    g.add_argument("--no-eval", action="store_true", help="skip evaluation on the test split")

    g = p.add_argument_group("checkpoints")
    g.add_argument("--output-dir", default=None, help="checkpoints and metrics.jsonl go here (rank 0 writes)")
    g.add_argument("--checkpoint-interval", type=parse_interval, default=None, metavar="INTERVAL",
                   help="also save every STEPS steps and/or every DURATION of training: 200, 5m, 500,10m "
                   "(see below); default off: only at epoch end, at --max-steps and on SIGTERM/SIGUSR1")
    g.add_argument("--checkpoint-every", type=non_negative_int, default=0, metavar="N",
                   help="also save every N steps (the same as --checkpoint-interval N)")
    g.add_argument("--keep-checkpoints", type=positive(int), default=3)
    g.add_argument("--resume", default=None, help="'auto' (newest valid checkpoint in --output-dir, if any) or a path")

    g = p.add_argument_group("metrics and checks")
    g.add_argument("--log-interval", type=positive(int), default=None, help="steps between log lines (default ~10 per epoch)")
    g.add_argument("--metrics-file", default=None, help="JSON-lines metrics (default OUTPUT_DIR/metrics.jsonl)")
    g.add_argument("--progress", choices=("auto", "bar", "lines"), default="auto",
                   help="auto: a progress bar on a terminal, plain lines otherwise")
    g.add_argument("--progress-records", choices=("on", "off"), default="on",
                   help="a progress record (one JSON line, ddp_train/progress.schema.json) per log interval on "
                   "every rank's stdout, read by 'ddpctl status' (default on)")
    g.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="also write the log interval's scalars (loss, lr, samples/s, GPU util, test accuracy) as "
                   "TensorBoard event files to DIR (rank 0; needs the tensorboard package)")
    g.add_argument("--sync-check", choices=("end", "off"), default="end")
    g.add_argument("--sync-check-every", type=non_negative_int, default=0, help="also check every N steps")
    g.add_argument("--quiet", action="store_true", help="only the summary line on stdout")
    g.add_argument("--profile-dir", default=None, metavar="DIR",
                   help="record --profile-steps steps of the timed window with torch.profiler on every rank: "
                   "DIR/trace-rank<R>.json.gz (Chrome trace; GPU kernels of graph replays included) and "
                   "DIR/kernels-rank<R>.txt; the steps are timed with the profiler on, so measure speed in a run "
                   "without it (benchmarks/trace_breakdown.py reads the traces)")
    g.add_argument("--profile-steps", type=positive(int), default=10, help="steps --profile-dir records (default 10)")
    # Test hooks, hidden from --help: plant a divergence on one rank; make one rank die at a step.
    g.add_argument("--debug-perturb-rank", type=int, default=None, help=argparse.SUPPRESS)
    g.add_argument("--debug-exit-rank", type=int, default=None, help=argparse.SUPPRESS)
    g.add_argument("--debug-exit-step", type=int, default=1, help=argparse.SUPPRESS)
    # Test hooks: each rank appends the sample indices of every step to DIR/samples-rank<R>.txt; sleep per step.
    g.add_argument("--debug-sample-log", default=None, help=argparse.SUPPRESS)
    g.add_argument("--debug-step-sleep", type=non_negative(float, WEEK_S), default=0.0, help=argparse.SUPPRESS)
    # Diagnosis hook, hidden: graph mode's flat reducer runs no collective (ranks drift; step-time breakdown only)
    g.add_argument("--debug-skip-grad-sync", action="store_true", help=argparse.SUPPRESS)
    # Test hook, hidden: graph mode's reducer (--graph-reducer flat|bucketed) in eager steps too, so the training
    # loop's use of it runs on CPU/gloo (tests/distributed/test_bucketed_allreduce_cpu.py); eager runs use DDP otherwise
    g.add_argument("--debug-reducer-in-eager", action="store_true", help=argparse.SUPPRESS)
    # Test hook, hidden: torch.compile's backend (aot_eager: the same autograd structure as inductor without its
    # C++ kernel builds, which take minutes on the 2-core CI machine); the default is torch.compile's own (inductor)
    g.add_argument("--debug-compile-backend", default=None, help=argparse.SUPPRESS)
    # Test hook, hidden: graph mode's reducers broadcast the BatchNorm buffers in every step, DDP's way, instead of
    # only before the steps whose buffers are read (the comparison in tests/distributed/test_buffer_sync_cpu.py)
    g.add_argument("--debug-per-step-buffer-broadcast", action="store_true", help=argparse.SUPPRESS)
    return p
