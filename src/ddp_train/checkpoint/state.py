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
from ddp_train.data.position import Position, resume_position
from ddp_train.errors import EXIT_CHECKPOINT, TrainError


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


def identity(config: RunConfig, *, world, per_rank_batch, strategy) -> dict:
    """The run's identity as a checkpoint records it (a resume checks workload and model against it)."""
    return {"workload": config.workload, "model": config.model, "seed": config.seed, "world_size": world,
            "per_rank_batch": per_rank_batch, "epochs": config.epochs, "strategy": strategy}


def find(config: RunConfig, rt):
    """(path, state) of the checkpoint --resume names, as rank 0 read it, on every rank; (None, None) if none."""
    path = state = None
    if rt.is0:
        if config.resume == "auto":
            path, skipped = ckpt_mod.newest_valid(config.output_dir)
            for p, why in skipped:
                rt.warn(f"skipping checkpoint {p}: {why}")
        else:
            path = config.resume
    if rt.is0 and path:
        state = ckpt_mod.load(path)
        cfg = state["config"]
        for key in ("workload", "model"):
            if cfg.get(key) != getattr(config, key):
                raise TrainError(f"checkpoint {path} is for {key} {cfg.get(key)!r}, this run is "
                                 f"{getattr(config, key)!r}; use a matching --{key} or another --output-dir",
                                 EXIT_CHECKPOINT)
    if rt.multi:
        box = [(path, state)]
        dist.broadcast_object_list(box, src=0, device=rt.device if rt.backend == "nccl" else None)
        path, state = box[0]
    return path, state


def resume(config: RunConfig, rt, parts, *, per_rank_batch, length):
    """Load the checkpoint --resume names into the run's parts; returns (its path, the run's position), or
    (None, a fresh start's position) when there is nothing to resume."""
    core, optimizer, schedule, lr = parts.core, parts.optimizer, parts.schedule, parts.lr
    path, state = find(config, rt)
    if state is None:
        if config.resume != "auto":
            raise TrainError(f"--resume {config.resume}: nothing to resume", EXIT_CHECKPOINT)
        rt.say("ddp-train: no checkpoint to resume from; starting fresh")
        return None, Position()
    core.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    r = resume_position(state, world=rt.world, per_rank_batch=per_rank_batch, length=length, epochs=config.epochs,
                        lr_warmup_epochs=config.lr_warmup_epochs)
    schedule.load_state_dict(state["scheduler"], samples_done=r.samples_done, plan=r.plan)
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
    apply_rng(state.get("rng") or [], rt.rank, rt.device)
    rt.say(f"ddp-train: resumed from {path} at epoch {pos.epoch} step {pos.global_step}")
    return path, pos


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def save(config: RunConfig, rt, parts, pos: Position, tag, *, metrics, per_rank_batch, epoch_steps, steps_per_epoch):
    """Every rank: its RNG states to rank 0, which writes the checkpoint and its metrics record; returns the
    path on rank 0, None elsewhere."""
    rngs = gather_rng(rt)
    if not rt.is0:
        return None
    body = payload(model=parts.core, optimizer=parts.optimizer, schedule=parts.schedule, pos=pos, rngs=rngs,
                   global_batch=rt.world * per_rank_batch, epoch_steps=epoch_steps, steps_per_epoch=steps_per_epoch,
                   config=identity(config, world=rt.world, per_rank_batch=per_rank_batch, strategy=rt.strategy))
    t0 = time.perf_counter()
    path = ckpt_mod.save(config.output_dir, body, keep=config.keep_checkpoints)
    metrics.write("checkpoint", path=path, step=pos.global_step, epoch=pos.epoch, reason=tag,
                  seconds=round(time.perf_counter() - t0, 3))
    return path
