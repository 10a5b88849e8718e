"""Where a run stands in its data: epoch, step in the epoch, global step, and the re-dealt epoch of an elastic
resume. Pure (no torch): the arithmetic of a fresh start, a checkpoint and a resume, tested on its own.

An epoch's permutation is consumed in whole global batches; after S steps of an ordinary epoch the ranks together
have taken its first S x global batch entries. A run resumed with another world size or per-rank batch deals the
rest of that epoch out to its ranks from that sample on: the epoch's ``segment`` is then (start sample, start
step), and the epoch has ``segment[1] + reshard_steps(...)`` steps (docs/ddp-train.md, "Elastic resume").
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def steps_per_epoch(length: int, world: int, batch: int) -> int:
    """Steps in an ordinary epoch: DistributedSampler's padded share per rank, in whole per-rank batches."""
    return math.ceil(length / world) // batch


def reshard_steps(length: int, world: int, batch: int, start_sample: int) -> int:
    """Whole global batches left in the epoch after ``start_sample`` entries (the tail is dropped)."""
    return max(0, length - start_sample) // (world * batch)


def epoch_steps(length: int, world: int, batch: int, segment: tuple[int, int] | None) -> int:
    """Steps in an epoch: all of it (segment None), or one re-dealt from (start sample, start step)."""
    if segment is None:
        return steps_per_epoch(length, world, batch)
    return segment[1] + reshard_steps(length, world, batch, segment[0])


@dataclass
class Position:
    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    segment: tuple[int, int] | None = None  # (start sample, start step) of an epoch re-dealt by an elastic resume

    def epoch_sample(self, global_batch: int) -> int:
        """Entries of this epoch's permutation the ranks have consumed."""
        seg = self.segment if self.step_in_epoch else None
        if seg:
            return seg[0] + (self.step_in_epoch - seg[1]) * global_batch
        return self.step_in_epoch * global_batch

    def checkpoint_fields(self, global_batch: int, epoch_steps: int, steps_per_epoch: int) -> dict:
        """The position as a checkpoint stores it (elastic resume: where this epoch's permutation stands, and how
        it was dealt)."""
        seg = self.segment if self.step_in_epoch else None
        return {"epoch_sample": self.epoch_sample(global_batch), "segment": list(seg) if seg else None,
                "epoch_steps": epoch_steps if self.step_in_epoch else steps_per_epoch}

    def stepped(self) -> None:
        self.global_step += 1
        self.step_in_epoch += 1

    def next_epoch(self) -> None:
        self.epoch += 1
        self.step_in_epoch = 0
        self.segment = None


def run_length(pos: Position, *, epoch_steps: int, steps_per_epoch: int, epochs: int,
               max_steps: int | None) -> tuple[int, int]:
    """(total steps, the step the run stops at) from where it stands: the rest of this epoch, then whole ones."""
    total = pos.global_step + (epoch_steps - pos.step_in_epoch) + steps_per_epoch * (epochs - pos.epoch - 1)
    return total, (min(total, max_steps) if max_steps else total)


@dataclass(frozen=True)
class Resumed:
    position: Position
    samples_done: int  # samples the schedule has advanced by
    plan: dict  # the schedule's plan in samples: {"total", "warm"}
    ck_world: int
    ck_batch: int
    epoch_sample: int  # where the checkpoint's epoch stands in its permutation

    changed: bool  # another world size or per-rank batch than the checkpoint's (not bit-identical then)

    @property
    def redealt(self) -> bool:
        """The rest of this epoch is dealt out anew (elastic resume mid-epoch)."""
        return self.changed and self.position.step_in_epoch > 0


def data_misfit(state: dict, length: int) -> str | None:
    """Why a checkpoint's position does not belong to a training set of ``length`` samples (it was saved on another
    one: its epochs and schedule would not fit), or None. Older checkpoints, which do not record the set's size,
    are judged by what their position implies of it."""
    cfg = state["config"]
    saved = cfg.get("train_samples")
    if saved is not None:
        return None if saved == length else f"it was saved with {saved} training samples, this run has {length}"
    sample = state.get("epoch_sample")
    if sample is not None and sample > length:
        return f"its epoch stands at sample {sample}, past this run's {length} training samples"
    ck_world, ck_batch, ck_steps = cfg.get("world_size"), cfg.get("per_rank_batch"), state.get("epoch_steps")
    if ck_world and ck_batch and ck_steps is not None and not state.get("segment"):
        here = steps_per_epoch(length, ck_world, ck_batch)
        if ck_steps != here:
            return (f"its epochs have {ck_steps} steps of {ck_world} x {ck_batch} samples, this run's {length} "
                    f"training samples give {here}")
    return None


def resume_position(state: dict, *, world: int, per_rank_batch: int, length: int, epochs: int,
                    lr_warmup_epochs: float) -> Resumed:
    """Where a run continues from a checkpoint's ``state`` on ``world`` ranks of ``per_rank_batch`` each.
    Checkpoints of older versions lack some keys; their values follow from the others."""
    cfg = state["config"]
    ck_world, ck_batch = cfg.get("world_size", world), cfg.get("per_rank_batch", per_rank_batch)
    ck_global = ck_world * ck_batch
    ck_steps = steps_per_epoch(length, ck_world, ck_batch)
    pos = Position(state["epoch"], state["step_in_epoch"], state["step"])
    samples_done = state.get("samples_done", pos.global_step * ck_global)
    plan = state.get("schedule") or {"total": ck_steps * epochs * ck_global,
                                     "warm": int(lr_warmup_epochs * ck_steps) * ck_global}
    segment = tuple(state["segment"]) if state.get("segment") else None
    sample = state.get("epoch_sample")
    if sample is None:
        sample = pos.step_in_epoch * ck_global
    if pos.step_in_epoch >= state.get("epoch_steps", ck_steps):  # saved at the epoch's last step
        pos.epoch, pos.step_in_epoch, segment = pos.epoch + 1, 0, None
    changed = (ck_world, ck_batch) != (world, per_rank_batch)
    if pos.step_in_epoch == 0:
        pos.segment = None
    elif not changed:
        pos.segment = segment  # the same deal goes on (the same as an uninterrupted run)
    else:  # elastic: deal the rest of this epoch's permutation out to the new ranks
        pos.segment = (min(sample, length), pos.step_in_epoch)
    return Resumed(pos, samples_done, plan, ck_world, ck_batch, sample, changed)
