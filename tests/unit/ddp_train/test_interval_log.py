"""ddp_train.observe.interval_log: a log interval counts its steps and data time."""

from __future__ import annotations

import torch

from ddp_train.observe.interval_log import IntervalLog


def test_interval_log_counts_its_steps_and_data_time():
    log = IntervalLog(torch.device("cpu"), write=None)
    log.start()
    acc = torch.tensor([6.0, 2.0])
    log.stepped(0.5)
    log.stepped(0.25)
    log.mark(acc, {"step": 2})
    log.stepped(0.1)
    log.mark(acc, {"step": 3})
    first, second = log.ready()
    assert (first["steps"], first["data"], first["step"], first["loss_sum"]) == (2, 0.75, 2, 6.0)
    assert (second["steps"], second["data"]) == (1, 0.1) and second["seconds"] >= 0
    written = []
    log.write = written.append
    log.mark(acc, {"step": 4})
    log.write_ready()
    assert [r["step"] for r in written] == [4] and log.ready() == []
