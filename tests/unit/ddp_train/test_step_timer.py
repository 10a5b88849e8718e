"""ddp_train.loop.step_timer: which steps are timed, paused time, data time and the throughput figures,
in-process with a hand-driven clock."""

from __future__ import annotations

import pytest
from timer_clock import make, run_steps


def test_the_untimed_steps_are_not_timed():
    timer, clock, gpu, _ = make(untimed=3)
    timer.resume(0)  # the start of training: still in the untimed steps
    assert not timer.running and not gpu.active
    run_steps(timer, clock, 1, 3, step_s=50.0)  # slow untimed steps: none of this may count
    assert timer.running and gpu.active  # the clock starts once step 3 (the last untimed step) is done
    run_steps(timer, clock, 4, 7, step_s=2.0)
    timer.pause()
    assert (timer.steps, timer.seconds) == (4, 8.0)
    assert timer.step_time() == 2.0 and not gpu.active


def test_no_untimed_steps_times_from_the_first_step():
    timer, clock, _, _ = make(untimed=0)
    timer.resume(0)
    run_steps(timer, clock, 1, 2, step_s=1.5)
    timer.pause()
    assert (timer.steps, timer.seconds) == (2, 3.0)


def test_paused_time_and_steps_are_excluded():
    timer, clock, gpu, _ = make(untimed=0)
    timer.resume(0)
    run_steps(timer, clock, 1, 2)
    timer.pause()
    clock.t += 1000.0  # a checkpoint, an evaluation: off the clock
    run_steps(timer, clock, 3, 3, step_s=7.0)  # a step while paused is not timed either
    assert not gpu.active
    timer.resume(3)
    run_steps(timer, clock, 4, 5)
    timer.pause()
    timer.pause()  # pausing twice adds nothing
    assert (timer.steps, timer.seconds) == (4, 4.0)


def test_resume_while_running_keeps_the_open_segment():
    timer, clock, _, _ = make(untimed=0)
    timer.resume(0)
    clock.t += 5.0
    timer.resume(1)  # must not restart the segment (the 5 s would be lost)
    timer.step_done(1, 0.0)
    timer.pause()
    assert timer.seconds == 5.0


def test_the_device_is_synced_before_each_clock_reading_at_both_ends():
    timer, clock, _, events = make(untimed=0)
    timer.resume(0)
    clock.t += 1.0
    timer.pause()
    assert events == ["sync", "clock", "sync", "clock"]
    timer.pause()
    timer.resume(-1)  # before the untimed steps' end (a no-op): no sync either
    assert events == ["sync", "clock", "sync", "clock"]


def test_data_time_counts_only_timed_steps():
    timer, clock, _, _ = make(untimed=2)
    timer.resume(0)
    run_steps(timer, clock, 1, 2, data_s=9.0)  # untimed: not counted
    run_steps(timer, clock, 3, 6, step_s=1.0, data_s=0.25)
    timer.pause()
    assert timer.data_seconds == 1.0 and timer.data_time() == 0.25


def test_images_per_sec_come_from_timed_steps_and_timed_seconds():
    timer, clock, _, _ = make(untimed=1)
    timer.resume(0)
    run_steps(timer, clock, 1, 1, step_s=100.0)
    run_steps(timer, clock, 2, 5, step_s=0.5)
    timer.pause()
    assert timer.images_per_sec(64) == pytest.approx(4 * 64 / 2.0)


def test_no_timed_step_gives_no_figures():
    timer, clock, _, _ = make(untimed=10)
    timer.resume(0)
    run_steps(timer, clock, 1, 4)
    timer.pause()
    assert (timer.step_time(), timer.data_time(), timer.images_per_sec(64)) == (None, None, None)


def test_fetch_times_the_wait_for_a_batch_and_ends_with_none():
    timer, clock, _, _ = make(untimed=0)

    def batches():
        clock.t += 0.75
        yield "b1"

    it = batches()
    assert timer.fetch(it) == ("b1", 0.75)
    assert timer.fetch(it) == (None, 0.0)
