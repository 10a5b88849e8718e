"""Stop requests and time-based checkpoints, agreed by all ranks at one step boundary.

SIGTERM (Kubernetes eviction, ``docker stop``, Slurm preemption) or SIGUSR1 (Slurm ``--signal``) may reach
only some ranks, and at different moments; a time-based checkpoint cadence reads a clock that only rank 0
should decide on. Saving is collective (the RNG states are gathered), so every rank must pick the same step.

At every step boundary each rank contributes ``[signal number or 0, time-due flag]`` to a MAX all-reduce of
two int64 on a gloo process group of its own (CPU, whatever the training backend): it never touches the GPU,
so it neither syncs the device nor interferes with a captured CUDA graph, and it runs asynchronously: the
reduce started at boundary k is collected at boundary k+1, normally finished by then: the host waits only as
long as its slowest peer is behind (benchmarks/stop_control.py measures it; docs/BENCHMARKS.md). The price is
one step of latency: a signal is acted on at most two step boundaries after it arrives. A single process
decides on the spot.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ddp_train.errors import EXIT_PREEMPTED, Preempted

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@dataclass(frozen=True)
class Decision:
    stop: str | None = None  # the signal's name when the ranks agreed to stop here
    save: bool = False  # the time-based checkpoint is due


class StopControl:
    def __init__(self, *, distributed: bool, rank: int, interval_s: float = 0.0):
        self.rank = rank
        self.interval_s = interval_s
        self.got: int = 0  # the first stop signal this process received
        self.last_save = time.monotonic()
        self.group = dist.new_group(backend="gloo") if distributed else None
        self.buf = torch.zeros(2, dtype=torch.int64)
        self.pending = None
        self._old = {}
        self.polls = 0

    # -------------------------------------------------------------------- signals
    def _handler(self, signum, frame):
        if not self.got:
            self.got = signum

    def install(self):
        for sig in STOP_SIGNALS:
            try:
                self._old[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: leave the defaults
                pass

    def uninstall(self):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    # -------------------------------------------------------------------- agreement
    def saved(self):
        """A checkpoint was just written (any reason): the time cadence restarts from now."""
        self.last_save = time.monotonic()

    def _local(self) -> list[int]:
        due = bool(self.interval_s) and self.rank == 0 and time.monotonic() - self.last_save >= self.interval_s
        return [int(self.got), int(due)]

    def poll(self) -> Decision:
        """Call at every step boundary, on every rank, the same number of times."""
        self.polls += 1
        if self.group is None:
            return self._decide(self._local())
        result = None
        if self.pending is not None:
            self.pending.wait()
            result = self.buf.tolist()
        decision = self._decide(result) if result else Decision()
        if decision.stop is None:
            # what this rank knows now (a save decided above has reset nothing yet: the caller's saved() does,
            # so the flag goes out only when the cadence is due at this moment)
            self.buf = torch.tensor(self._local_after(decision), dtype=torch.int64)
            self.pending = dist.all_reduce(self.buf, op=dist.ReduceOp.MAX, group=self.group, async_op=True)
        else:
            self.pending = None
        return decision

    def _local_after(self, decision: Decision) -> list[int]:
        sig, due = self._local()
        return [sig, 0 if decision.save else due]

    def _decide(self, values) -> Decision:
        sig, due = int(values[0]), int(values[1])
        name = signal.Signals(sig).name if sig else None
        return Decision(stop=name, save=bool(due) and not name)

    def barrier(self):
        """Every rank waits here for the others (CPU, on the control group); nothing in a single process."""
        if self.group is not None:
            dist.barrier(group=self.group)

    def drain(self):
        """Wait for the reduce still in flight (the run ends normally): every rank started the same ones."""
        if self.pending is not None:
            self.pending.wait()
            self.pending = None


def leave(control: StopControl, signame: str, *, step: int, epoch: int, path: str | None, saved: bool, metrics):
    """All ranks agreed to stop at ``step`` and saved there (``saved``: with --output-dir; ``path``: the
    checkpoint, known on rank 0): record it (rank 0's ``metrics``), wait for every rank, leave by Preempted."""
    if metrics is not None:
        metrics.write("preempted", signal=signame, step=step, checkpoint=path)
        metrics.close()
    # Nobody leaves before rank 0's checkpoint is on disk: a launcher that sees one rank exit may kill the
    # others at once (srun --kill-on-bad-exit, a pod's other containers), rank 0 in the middle of its save.
    control.barrier()
    where = (f"checkpoint {path} saved" if path else "checkpoint saved by rank 0") if saved \
        else "no checkpoint (no --output-dir)"
    control.uninstall()
    raise Preempted(f"{signame} at step {step} (epoch {epoch + 1}); {where}; retryable "
                    f"(exit {EXIT_PREEMPTED}): run again with --resume auto to continue from step {step}")
