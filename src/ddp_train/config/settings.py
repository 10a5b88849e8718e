"""From the command line to the run's ``RunConfig``: the parsed flags with the workload's defaults filled in and
the rules of the flags alone checked (``parse_args``). The flags are declared in ``flags``; the rules that relate
the config to the launch and the step plan are in ``run_plan``."""

from __future__ import annotations

from dataclasses import dataclass

from ddp_train.config import output_paths
from ddp_train.config.checkpoint_interval import CheckpointInterval
from ddp_train.config.flags import COMPILE_UNIT_MODELS, build_parser
from ddp_train.config.run_config import RunConfig, from_namespace
from ddp_train.errors import EXIT_USAGE, TrainError


@dataclass(frozen=True)
class WorkloadDefaults:
    model: str
    shape: tuple[int, int, int]  # C, H, W
    num_classes: int
    train_size: int
    test_size: int
    epochs: int
    batch_size: int
    lr: float
    pad: int  # random-crop padding (0: no crop)
    flip: bool
    synthetic_pool: int  # distinct synthetic images held (0: one per sample)


WORKLOAD_DEFAULTS = {
    # Not a real data set: small, so `ddp-train` with no arguments finishes in seconds on CPU.
    "toy": WorkloadDefaults("toy-cnn", (3, 32, 32), 10, 2048, 512, 2, 32, 0.05, 2, True, 0),
    "mnist": WorkloadDefaults("mnist-cnn", (1, 28, 28), 10, 60000, 10000, 1, 64, 0.05, 2, False, 0),
    "cifar10": WorkloadDefaults("resnet18", (3, 32, 32), 10, 50000, 10000, 1, 256, 0.1, 4, True, 0),
    # ImageNet-1k shaped; 1,281,167 samples per epoch drawn from a pool of distinct synthetic images.
    "imagenet-synthetic": WorkloadDefaults("resnet50", (3, 224, 224), 1000, 1281167, 50000, 1, 256, 0.1, 16, True, 2048),
}


def parse_args(argv) -> RunConfig:
    """The run's config from its command line; bad flags raise a one-line TrainError (exit 2)."""
    args = build_parser().parse_args(argv)
    d = WORKLOAD_DEFAULTS[args.workload]
    for name in ("model", "train_size", "test_size", "epochs", "batch_size", "lr", "synthetic_pool"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(d, name))
    if args.data_dir and args.workload in ("toy", "imagenet-synthetic"):
        raise TrainError(f"--data-dir has no real data set for workload {args.workload!r}; "
                         "use --workload cifar10 or mnist, or drop --data-dir", EXIT_USAGE)
    if (args.rank is None) != (args.world_size is None):
        raise TrainError("--rank and --world-size go together; pass both (or neither, under torchrun)", EXIT_USAGE)
    if args.rank is not None and args.rank >= args.world_size:
        raise TrainError(f"--rank {args.rank} must be below --world-size {args.world_size}", EXIT_USAGE)
    if args.init_method and not args.init_method.startswith(("tcp://", "file://", "env://")):
        raise TrainError(f"--init-method {args.init_method!r} is not tcp://HOST:PORT, file:///path or env://",
                         EXIT_USAGE)
    if args.init_method and args.init_method.startswith(("tcp://", "file://")) and args.rank is None:
        raise TrainError(f"--init-method {args.init_method} needs --rank and --world-size", EXIT_USAGE)
    if args.resume and args.resume == "auto" and not args.output_dir:
        raise TrainError("--resume auto looks in --output-dir; pass --output-dir DIR", EXIT_USAGE)
    interval = args.checkpoint_interval or CheckpointInterval()
    if args.checkpoint_every:
        if interval.steps and interval.steps != args.checkpoint_every:
            raise TrainError(f"--checkpoint-every {args.checkpoint_every} and --checkpoint-interval "
                             f"{interval.steps} disagree on the steps; keep one of them", EXIT_USAGE)
        interval = CheckpointInterval(args.checkpoint_every, interval.seconds)
    args.checkpoint_interval = interval
    if args.compile_scope == "blocks":
        if not (args.compile or (args.compile is None and args.compile_if_repaid)):
            raise TrainError("--compile-scope blocks chooses what torch.compile compiles, but this run never "
                             "compiles (" + ("--no-compile" if args.compile is False else "--no-compile-if-repaid")
                             + "); add --compile, or drop --compile-scope", EXIT_USAGE)
        if args.model not in COMPILE_UNIT_MODELS:
            raise TrainError(f"--compile-scope blocks: model {args.model} names no compile units (models that do: "
                             f"{', '.join(COMPILE_UNIT_MODELS)}); use --compile-scope model", EXIT_USAGE)
        if args.strategy == "dp":
            raise TrainError("--compile-scope blocks does not work with --strategy dp (DataParallel's replicas "
                             "would run the original blocks' compiled code); use --strategy ddp or "
                             "--compile-scope model", EXIT_USAGE)
    output_paths.check(args)  # every rank, before anything is created or trained (and before the process group)
    if args.tensorboard:  # every rank, before the process group: all stop alike, none sees a lost peer
        from ddp_train.observe.tensorboard import require

        require()
    return from_namespace(args)


