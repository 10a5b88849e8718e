"""The learning-rate schedule: linear warm-up, then cosine decay (or constant), by samples rather than steps.

At a fixed world size a step is one global batch, so samples and steps agree; a run resumed on fewer ranks, with
smaller global batches, gets the LR of its place in the data. The plan (in samples) is the first start's; a resume
takes it from the checkpoint. Pure Python (the optimizer's ``param_groups`` are plain dicts), tested on its own.

The schedule sets each parameter group's ``lr`` to its base LR times ``factor()``; it reads the groups from the
optimizer every time (``load_state_dict`` gives an optimizer new group dicts). Its ``state_dict`` keeps the
layout of torch's ``LambdaLR``, which wrote the ``scheduler`` entry of ddp-train's checkpoints before, so old and
new checkpoints resume alike; ``samples_done`` and ``plan`` are checkpoint entries of their own.
"""

from __future__ import annotations

import math


def factor(*, samples_done: int, global_batch: int, total: int, warm: int, kind: str) -> float:
    """The LR multiplier for the step after ``samples_done`` samples."""
    if warm and samples_done < warm:
        return (samples_done + global_batch) / warm
    if kind == "constant":
        return 1.0
    progress = min(1.0, (samples_done - warm) / max(global_batch, total - warm))
    return 0.5 * (1 + math.cos(math.pi * progress))


class Schedule:
    def __init__(self, optimizer, *, kind: str, total: int, warm: int, global_batch: int):
        self.optimizer, self.kind, self.global_batch = optimizer, kind, global_batch
        self.plan = {"total": total, "warm": warm}
        self.samples_done = 0
        for g in self.groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in self.groups]
        self.last_epoch = -1  # steps taken (LambdaLR's name for it)
        self.step_count = 0
        self._advance(0)

    @property
    def groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def factor(self) -> float:
        return factor(samples_done=self.samples_done, global_batch=self.global_batch, kind=self.kind, **self.plan)

    def _advance(self, samples: int) -> None:
        self.samples_done += samples
        self.last_epoch += 1
        self.step_count += 1
        f = self.factor()
        for g, base in zip(self.groups, self.base_lrs, strict=True):
            g["lr"] = base * f
        self.last_lrs = [g["lr"] for g in self.groups]

    def step(self) -> None:
        """After an optimizer step of one global batch."""
        self._advance(self.global_batch)

    def lr(self) -> float:
        return self.last_lrs[0]

    def rebase(self, lr: float) -> None:
        """A new base LR for every group from here on (--scale-lr on a resume with another global batch)."""
        self.base_lrs = [lr for _ in self.groups]
        for g in self.groups:
            g["initial_lr"] = lr
            g["lr"] = lr * self.factor()

    def state_dict(self) -> dict:
        return {"base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch, "_step_count": self.step_count,
                "_is_initial": False, "_get_lr_called_within_step": False, "_last_lr": list(self.last_lrs),
                "lr_lambdas": [None] * len(self.groups)}

    def load_state_dict(self, state: dict, *, samples_done: int, plan: dict) -> None:
        """A checkpoint's ``scheduler`` entry (the groups' ``lr`` comes with the optimizer's state), its samples
        done and its plan. An entry of another layout or length than this optimizer's groups is a ValueError."""
        n = len(self.groups)
        for key in ("base_lrs", "_last_lr"):
            v = state.get(key)
            if not (isinstance(v, list) and len(v) == n and all(_is_number(x) for x in v)):
                raise ValueError(f"its {key} is not a list of {n} learning rate(s)")
        for key in ("last_epoch", "_step_count"):
            if not (isinstance(state.get(key), int) and not isinstance(state.get(key), bool)):
                raise ValueError(f"its {key} is not an integer")
        self.base_lrs = list(state["base_lrs"])
        self.last_epoch, self.step_count = state["last_epoch"], state["_step_count"]
        self.last_lrs = list(state["_last_lr"])
        self.samples_done, self.plan = samples_done, dict(plan)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
