"""A step timer on a clock the test moves (the timer and summary tests share it)."""

from __future__ import annotations

from types import SimpleNamespace

from ddp_train.loop.step_timer import StepTimer


class Clock:
    """A clock the test moves; every reading is logged after the device syncs the timer asked for."""

    def __init__(self, events):
        self.t, self.events = 100.0, events

    def __call__(self):
        self.events.append("clock")
        return self.t


def make(untimed):
    events = []
    clock = Clock(events)
    gpu = SimpleNamespace(active=False)
    timer = StepTimer(untimed, sync=lambda: events.append("sync"), gpu=gpu, clock=clock)
    return timer, clock, gpu, events


def run_steps(timer, clock, first, last, step_s=1.0, data_s=0.25):
    """Global steps first..last, each taking step_s (data_s of it waiting for the batch)."""
    for g in range(first, last + 1):
        clock.t += step_s
        timer.step_done(g, data_s)
