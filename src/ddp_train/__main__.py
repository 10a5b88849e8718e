"""Entry point for ``ddp-train`` and ``python -m ddp_train``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from ddp_train.errors import (
    EXIT_CHECKPOINT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SYNC,
    EXIT_USAGE,
    LOST_PEER_TEXT,
    RETRYABLE_MIN,
    Preempted,
    TrainError,
    classify,
    is_nccl_refusal,
)
from ddp_train.visible import bounded, visible

COMPARE_EPILOG = """\
example:
  ddp-train compare run-a/ckpt-00000100.pt run-b/ckpt-00000100.pt
exit codes: 0 identical (or within --atol), 4 they differ, 5 a file is not a valid checkpoint, 2 bad arguments.
"""


def compare_main(argv) -> int:
    from ddp_train.config.flag_types import non_negative
    from ddp_train.config.flags import ArgParser

    p = ArgParser(prog="ddp-train compare", description="Compare the models of two ddp-train checkpoints tensor "
                "by tensor; prints one JSON line.", epilog=COMPARE_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--atol", type=non_negative(float), default=0.0,
                   help="largest absolute difference still counted equal")
    p.add_argument("--all", action="store_true", help="also compare optimizer state and step counters")
    args = p.parse_args(argv)
    from ddp_train.checkpoint import storage as checkpoint
    from ddp_train.comm import sync

    fix = "pass two checkpoint files written by ddp-train (ckpt-<step>.pt, each with its .json sidecar)"
    ca, cb = checkpoint.load(args.a, fix=fix), checkpoint.load(args.b, fix=fix)
    res = sync.compare_state_dicts(ca["model"], cb["model"], args.atol)
    if args.all:
        for key in ("step", "epoch", "step_in_epoch"):
            if ca[key] != cb[key]:
                res["differ"].append(key)
                res["identical_or_within_atol"] = False
        oa, ob = ca["optimizer"].get("state", {}), cb["optimizer"].get("state", {})
        try:
            for k in sorted(set(oa) | set(ob), key=str):
                r = sync.compare_state_dicts(oa.get(k, {}), ob.get(k, {}), args.atol)
                if not r["identical_or_within_atol"]:
                    res["differ"].append(f"optimizer.state.{k}")
                    res["identical_or_within_atol"] = False
        except Exception as exc:  # noqa: BLE001 - an optimizer state of another layout (a hostile file)
            raise TrainError(f"the optimizer states of {bounded(args.a, 300)} and {bounded(args.b, 300)} cannot be "
                             f"compared ({type(exc).__name__}: {bounded(exc, 120)}); compare without --all",
                             EXIT_CHECKPOINT) from None
    for key in ("differ", "shape_or_dtype", "only_in_a", "only_in_b"):  # names from the files: each one bounded
        res[key] = [bounded(name) for name in res[key]]
    for line in res["differ"][:50]:
        print(f"differs: {visible(line, limit=300)}", file=sys.stderr)
    for line in res["shape_or_dtype"][:50]:
        print(f"shape/dtype: {visible(line, limit=300)}", file=sys.stderr)
    print(json.dumps({"event": "compare", "a": args.a, "b": args.b, **res}))
    return EXIT_OK if res["identical_or_within_atol"] else EXIT_SYNC


def _exit(code: int, distributed: bool) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    from ddp_train.runtime import distributed as dist_mod

    if distributed or dist_mod.JOINED[0]:
        # Peers may be blocked in a collective; tearing the process group down could hang. Leave now.
        os._exit(code)
    return code


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    distributed = False
    try:
        if argv[:1] == ["compare"]:
            return compare_main(argv[1:])
        from ddp_train.config.settings import parse_args

        config = parse_args(argv)
        from ddp_train.runtime.startup import import_modules

        # torch, the compiler every optimizer step imports, and the training code, with the collector paused
        import_modules("torch", "torch._dynamo", "torch.distributed", "ddp_train.loop.trainer")
        import torch.distributed as dist

        from ddp_train.loop.trainer import run

        try:
            code = run(config)
        finally:
            distributed = dist.is_available() and dist.is_initialized()
        # A process that joined a process group leaves with os._exit: tearing down gloo/NCCL threads in
        # interpreter finalisation can abort ("terminate called without an active exception").
        return _exit(code, distributed)
    except Preempted as exc:
        print(f"ddp-train: stopped: {visible(exc)}", file=sys.stderr)
        return _exit(exc.code, distributed)
    except TrainError as exc:
        print(f"ddp-train: error: {visible(exc)}", file=sys.stderr)
        return _exit(exc.code, distributed)
    except KeyboardInterrupt:
        print("ddp-train: interrupted", file=sys.stderr)
        return _exit(EXIT_INTERRUPTED, distributed)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except BaseException as exc:  # noqa: BLE001 - map everything else to an exit code
        code = classify(exc)
        first = visible((str(exc).strip().splitlines() or [""])[0], limit=300)
        if is_nccl_refusal(exc):
            print(f"ddp-train: error: NCCL refused this run's settings ({type(exc).__name__}: {first}); check the "
                  f"NCCL_* environment variables (NCCL_ALGO, NCCL_PROTO, ...) against this topology; not retryable "
                  f"(exit code {code})", file=sys.stderr)
        elif code >= RETRYABLE_MIN:
            print(f"ddp-train: error: {LOST_PEER_TEXT} or timed out ({type(exc).__name__}: {first}); retryable, "
                  "restart the job (exit code {code})".replace("{code}", str(code)), file=sys.stderr)
        else:
            traceback.print_exc()
            print(f"ddp-train: error: internal error {type(exc).__name__}: {first}; please report it",
                  file=sys.stderr)
        return _exit(code if code else EXIT_INTERNAL, distributed)


if __name__ == "__main__":
    sys.exit(main())
