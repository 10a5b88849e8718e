"""ddp_train.loop.preempt: the stop control in one process (the multi-process agreement runs on real gloo groups
in tests/distributed/test_preemption_cpu.py), and SIGTERM saving and exiting 143."""

from __future__ import annotations

import os
import signal

from ddp_train.__main__ import main
from ddp_train.errors import EXIT_PREEMPTED
from ddp_train.loop import preempt


def test_stop_control_single_process_acts_at_once():
    c = preempt.StopControl(distributed=False, rank=0)
    c.install()
    try:
        assert c.poll() == preempt.Decision()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert c.poll() == preempt.Decision(stop="SIGUSR1")
    finally:
        c.uninstall()
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_stop_control_time_cadence_is_rank0s(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(preempt.time, "monotonic", lambda: now[0])
    c0 = preempt.StopControl(distributed=False, rank=0, interval_s=60)
    c1 = preempt.StopControl(distributed=False, rank=1, interval_s=60)
    now[0] += 59
    assert not c0.poll().save
    now[0] += 1
    assert c0.poll().save and not c1.poll().save  # only rank 0's clock counts (the flag reaches the others)
    c0.saved()
    assert not c0.poll().save


def test_sigterm_in_one_process_saves_and_exits_143(tmp_path, capsys):
    """--debug-exit-... is not needed: the process signals itself from a step hook (SIGTERM at step 3)."""
    out = tmp_path / "o"
    from ddp_train.loop import faults

    orig = faults.after_step

    def hook(args, **kw):
        orig(args, **kw)
        if kw["global_step"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    faults.after_step = hook
    try:
        code = main(["--workload", "toy", "--train-size", "256", "--test-size", "64", "--batch-size", "32",
                     "--epochs", "1", "--strategy", "single", "--quiet", "--output-dir", str(out)])
    finally:
        faults.after_step = orig
    assert code == EXIT_PREEMPTED
    err = capsys.readouterr().err
    assert "ddp-train: stopped: SIGTERM at step 3 (epoch 1); checkpoint" in err and "--resume auto" in err
    assert (out / "ckpt-00000003.pt.json").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
