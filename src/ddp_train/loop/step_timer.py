"""The step timer: which steps count towards the throughput figures, and how long they took.

The first `untimed_steps` global steps (``--warmup-steps``) are never timed (cuDNN autotuning, allocator growth, graph capture).
After them the clock runs in segments: `pause()` before anything that is not training (a checkpoint, a sync
check, evaluation, the end of an epoch) and `resume()` after it, so only training time is counted. Data time
(waiting for the next batch) is counted inside the timed segments too, and reported apart from the step time
it is part of. Both ends of a segment wait for the device first (`sync`), so queued GPU work lands in the
segment that queued it.
"""

from __future__ import annotations

import time


class StepTimer:
    def __init__(self, untimed_steps, sync=lambda: None, gpu=None, clock=time.perf_counter):
        self.untimed_steps = untimed_steps
        self.sync = sync  # waits for the device's queued work
        self.gpu = gpu  # GpuStats (or None): samples utilisation only while the clock runs
        self.clock = clock
        self.seconds = 0.0  # timed: the closed segments
        self.steps = 0  # timed steps
        self.data_seconds = 0.0  # of which waiting for data
        self._start = None  # the open segment's start, None while paused

    @property
    def running(self) -> bool:
        return self._start is not None

    def resume(self, global_step):
        """Open a segment, once the untimed steps are behind (a no-op before them or while running)."""
        if global_step >= self.untimed_steps and self._start is None:
            self.sync()
            self._start = self.clock()
            self._gpu_active(True)

    def pause(self):
        """Close the open segment (a no-op while paused)."""
        if self._start is not None:
            self.sync()
            self.seconds += self.clock() - self._start
            self._start = None
            self._gpu_active(False)

    def fetch(self, batches):
        """The next batch of the iterator and the seconds it took (None at its end)."""
        t0 = self.clock()
        try:
            batch = next(batches)
        except StopIteration:
            return None, 0.0
        return batch, self.clock() - t0

    def step_done(self, global_step, data_s):
        """A training step ended at `global_step` after `data_s` seconds of waiting for its batch: it counts if the
        clock ran, and the clock starts once the untimed steps are done."""
        if self._start is not None:
            self.steps += 1
            self.data_seconds += data_s
        if global_step == self.untimed_steps:
            self.resume(global_step)

    # ----------------------------------------------------------------------------- figures (None: no timed step)
    def step_time(self):
        return self.seconds / self.steps if self.steps else None

    def data_time(self):
        return self.data_seconds / self.steps if self.steps else None

    def images_per_sec(self, global_batch):
        return self.steps * global_batch / self.seconds if self.seconds > 0 and self.steps else None

    def _gpu_active(self, on):
        if self.gpu is not None:
            self.gpu.active = on
