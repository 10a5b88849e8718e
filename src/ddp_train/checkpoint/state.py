"""What a checkpoint holds of a run, and putting it back: the payload (model, optimizer, schedule, position,
every rank's RNG states, the run's configuration) and the resume from one. ``checkpoint`` writes, lists and
validates the files; this module decides their content."""

from __future__ import annotations

import random
import time

import torch
import torch.distributed as dist

from ddp_train.checkpoint import storage as ckpt_mod
from ddp_train.config.run_config import RunConfig
from ddp_train.data.position import Position, data_misfit, resume_position
from ddp_train.errors import EXIT_CHECKPOINT, TrainError
from ddp_train.visible import bounded


class Misfit(ValueError):
    """A checkpoint part that does not fit this run's (its text says how)."""


def rng_state(device) -> dict:
    """This process's RNG states: torch's, the device's (CUDA) and Python's."""
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "python": random.getstate()}


def gather_rng(rt) -> list:
    """Every rank's RNG states, in rank order (a collective: every rank calls it)."""
    mine = rng_state(rt.device)
    if not rt.multi:
        return [mine]
    rngs = [None] * rt.world
    dist.all_gather_object(rngs, mine)
    return rngs


def apply_rng(rngs: list, rank: int, device) -> None:
    """Restore this rank's RNG states from a checkpoint's list (a rank it lacks keeps its own)."""
    if rank >= len(rngs):
        return
    r = rngs[rank]
    torch.set_rng_state(r["torch"])
    if device.type == "cuda" and r.get("cuda") is not None:
        torch.cuda.set_rng_state(r["cuda"], device)
    random.setstate(_to_tuple(r["python"]))


def payload(*, model, optimizer, schedule, pos: Position, rngs, global_batch, epoch_steps, steps_per_epoch,
            config: dict) -> dict:
    """The checkpoint's content (``checkpoint.REQUIRED`` lists the keys a file must have)."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": schedule.state_dict(),
            "epoch": pos.epoch, "step": pos.global_step, "step_in_epoch": pos.step_in_epoch, "rng": rngs,
            **pos.checkpoint_fields(global_batch, epoch_steps, steps_per_epoch),
            "samples_done": schedule.samples_done, "schedule": dict(schedule.plan), "config": config}


def identity(config: RunConfig, *, world, per_rank_batch, strategy, train_samples) -> dict:
    """The run's identity as a checkpoint records it (a resume checks workload, model, optimizer and the training
    set's size against it)."""
    return {"workload": config.workload, "model": config.model, "seed": config.seed, "world_size": world,
            "per_rank_batch": per_rank_batch, "epochs": config.epochs, "strategy": strategy,
            "optimizer": config.optimizer, "train_samples": train_samples}


def find(config: RunConfig, rt):
    """(path, state) of the checkpoint --resume names, as rank 0 read it, on every rank; (None, None) if none.
    A checkpoint rank 0 cannot load is the same one-line error on every rank."""
    path = state = failed = None
    if rt.is0:
        try:
            if config.resume == "auto":
                path, skipped = ckpt_mod.newest_valid(config.output_dir)
                for p, why in skipped:
                    rt.warn(f"skipping checkpoint {bounded(p, 300)}: {why}")
            else:
                path = config.resume
            state = ckpt_mod.load(path) if path else None
        except TrainError as exc:
            failed = (str(exc), exc.code)
    if rt.multi:
        box = [(path, state, failed)]
        dist.broadcast_object_list(box, src=0, device=rt.device if rt.backend == "nccl" else None)
        path, state, failed = box[0]
    if failed:
        raise TrainError(*failed)
    return path, state


def optimizer_of(state: dict) -> str | None:
    """The --optimizer a checkpoint was saved with: its config's, else what its parameter groups show (a file of
    an older version), else None."""
    if state["config"].get("optimizer"):
        return state["config"]["optimizer"]
    groups = state["optimizer"].get("param_groups")
    group = groups[0] if isinstance(groups, list) and groups and isinstance(groups[0], dict) else {}
    return "adamw" if "betas" in group else "sgd" if "momentum" in group else None


def check_fits(path, state: dict, config: RunConfig, *, length: int) -> None:
    """Refuse (exit 5, one line) a checkpoint of another workload, model, optimizer or training set."""
    cfg, shown = state["config"], bounded(path, 300)
    for key in ("workload", "model"):
        if cfg.get(key) != getattr(config, key):
            raise TrainError(f"checkpoint {shown} is for {key} {bounded(repr(cfg.get(key)))}, this run is "
                             f"{getattr(config, key)!r}; use a matching --{key} or another --output-dir",
                             EXIT_CHECKPOINT)
    saved = optimizer_of(state)
    if saved is not None and saved != config.optimizer:
        raise TrainError(f"checkpoint {shown} was saved with --optimizer {bounded(saved)}, this run has "
                         f"--optimizer {config.optimizer}: its optimizer state does not fit; resume with the same "
                         "optimizer or start afresh (another --output-dir)", EXIT_CHECKPOINT)
    why = data_misfit(state, length)
    if why:
        size = cfg.get("train_samples")
        data = "the same --data-dir data" if config.data_dir else f"--train-size {size}" if size else "its --train-size"
        raise TrainError(f"checkpoint {shown} does not fit this run's training set: {why}; resume with the training "
                         f"set it was saved with ({data}) or start afresh (another --output-dir)", EXIT_CHECKPOINT)


def _load_part(path, name, load) -> None:
    """``load()`` a checkpoint part into the run; whatever goes wrong is the checkpoint's one-line error."""
    try:
        load()
    except Exception as exc:  # noqa: BLE001 - a hostile or foreign file can fail any way
        why = bounded(exc, 240) if isinstance(exc, Misfit) else f"{type(exc).__name__}: {bounded(exc, 160)}"
        raise TrainError(f"checkpoint {bounded(path, 300)}: its {name} does not fit this run ({why}); pass a "
                         "checkpoint this run wrote, or start afresh (another --output-dir)", EXIT_CHECKPOINT) from None


def resume(config: RunConfig, rt, parts, *, per_rank_batch, length):
    """Load the checkpoint --resume names into the run's parts; returns (its path, the run's position), or
    (None, a fresh start's position) when there is nothing to resume."""
    core, optimizer, schedule, lr = parts.core, parts.optimizer, parts.schedule, parts.lr
    path, state = find(config, rt)
    if state is None:
        if config.resume != "auto":
            raise TrainError(f"--resume {bounded(config.resume, 300)}: nothing to resume", EXIT_CHECKPOINT)
        rt.say("ddp-train: no checkpoint to resume from; starting fresh")
        return None, Position()
    check_fits(path, state, config, length=length)
    _load_part(path, "model", lambda: load_model(core, state["model"]))
    _load_part(path, "optimizer state", lambda: load_optimizer(optimizer, state["optimizer"], config.optimizer))
    r = resume_position(state, world=rt.world, per_rank_batch=per_rank_batch, length=length, epochs=config.epochs,
                        lr_warmup_epochs=config.lr_warmup_epochs)
    _load_part(path, "scheduler state",
               lambda: schedule.load_state_dict(state["scheduler"], samples_done=r.samples_done, plan=r.plan))
    pos = r.position
    if r.redealt:  # elastic: deal the rest of this epoch's permutation out to the new ranks (docs/ddp-train.md)
        rt.say(f"ddp-train: elastic resume: {r.ck_world} x {r.ck_batch} -> {rt.world} x {per_rank_batch} "
               f"(ranks x per-rank batch); the rest of epoch {pos.epoch + 1} is dealt out from sample "
               f"{r.epoch_sample} of {length}, so no sample is seen twice in it")
    if r.changed:
        rt.warn(f"resuming a checkpoint of {r.ck_world} ranks x batch {r.ck_batch} with {rt.world} x "
                f"{per_rank_batch}: the global batch is now {rt.world * per_rank_batch}"
                + (f" and --scale-lr sets the base LR to {lr:.6g}" if config.scale_lr else
                   " with the same LR (--scale-lr would scale it)")
                + "; not bit-identical to an uninterrupted run")
        if config.scale_lr:  # the linear scaling rule for the batch in use now
            schedule.rebase(lr)
    _load_part(path, "RNG state", lambda: apply_rng(state.get("rng") or [], rt.rank, rt.device))
    rt.say(f"ddp-train: resumed from {path} at epoch {pos.epoch} step {pos.global_step}")
    return path, pos


def load_model(core, saved: dict) -> None:
    """The model's weights; keys or shapes that differ from this model's are named (at most three of each)."""
    want = core.state_dict()
    missing = [k for k in want if k not in saved]
    extra = [k for k in saved if k not in want]
    shapes = [k for k in want if k in saved and tuple(saved[k].shape) != tuple(want[k].shape)]
    for what, keys in (("lacks", missing), ("has keys this model lacks:", extra), ("has other shapes for", shapes)):
        if keys:
            raise Misfit(f"it {what} {', '.join(bounded(k, 60) for k in keys[:3])}"
                         + (f" and {len(keys) - 3} more" if len(keys) > 3 else ""))
    core.load_state_dict(saved)


# What each --optimizer keeps per parameter (once it has stepped it)
_PER_PARAM = {"sgd": ("momentum_buffer",), "adamw": ("step", "exp_avg", "exp_avg_sq")}


def load_optimizer(optimizer, saved: dict, name: str) -> None:
    """The optimizer's state: a parameter's entries are the ones ``name`` keeps, each tensor of its shape."""
    optimizer.load_state_dict(saved)
    for group in optimizer.param_groups:
        for p in group["params"]:
            st = optimizer.state.get(p)
            if not st:
                continue
            lacks = [k for k in _PER_PARAM.get(name, ()) if k not in st]
            if lacks:
                raise Misfit(f"a parameter's state lacks {', '.join(lacks)} (it is not --optimizer {name}'s)")
            for key, v in st.items():
                if torch.is_tensor(v) and v.dim() and v.shape != p.shape:
                    raise Misfit(f"its {bounded(key, 60)} has shape {tuple(v.shape)} for a parameter of "
                                 f"{tuple(p.shape)}")


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def save(config: RunConfig, rt, parts, pos: Position, tag, *, metrics, per_rank_batch, epoch_steps, steps_per_epoch,
         train_samples):
    """Every rank: its RNG states to rank 0, which writes the checkpoint and its metrics record; returns the
    path on rank 0, None elsewhere."""
    rngs = gather_rng(rt)
    if not rt.is0:
        return None
    body = payload(model=parts.core, optimizer=parts.optimizer, schedule=parts.schedule, pos=pos, rngs=rngs,
                   global_batch=rt.world * per_rank_batch, epoch_steps=epoch_steps, steps_per_epoch=steps_per_epoch,
                   config=identity(config, world=rt.world, per_rank_batch=per_rank_batch, strategy=rt.strategy,
                                   train_samples=train_samples))
    t0 = time.perf_counter()
    path = ckpt_mod.save(config.output_dir, body, keep=config.keep_checkpoints)
    metrics.write("checkpoint", path=path, step=pos.global_step, epoch=pos.epoch, reason=tag,
                  seconds=round(time.perf_counter() - t0, 3))
    return path
