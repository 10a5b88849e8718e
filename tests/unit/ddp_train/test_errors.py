"""ddp_train.errors: exit codes and the classification of failures (retryable or permanent)."""

from __future__ import annotations

import signal

from ddp_train.errors import (
    EXIT_LOST_PEER,
    EXIT_PREEMPTED,
    EXIT_USAGE,
    RETRYABLE_MIN,
    classify,
)


def test_preempted_code_is_retryable():
    assert EXIT_PREEMPTED == 128 + signal.SIGTERM >= RETRYABLE_MIN


def test_nccl_refusing_its_settings_is_permanent_not_a_lost_peer():
    """NCCL_ALGO=Tree on a 4-GPU H200 host: NCCL answers the first collective with 'invalid usage' (seen on a 4x H200
    machine); a restart would fail the same way, so it is a usage error, not a lost peer (129). The
    exception is built here as torch raises it (no NCCL on this machine)."""
    import torch.distributed as dist

    exc = dist.DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:3780, invalid usage (run with NCCL_DEBUG=WARN "
                                "for details), NCCL version 2.28.9")
    assert classify(exc) == EXIT_USAGE
    assert classify(dist.DistBackendError("NCCL error in: x.cpp:1, remote process exited or there was a network "
                                          "error, NCCL version 2.28.9")) == EXIT_LOST_PEER


def test_classify_retryable_errors():
    assert classify(RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:1234")) == EXIT_LOST_PEER
    assert classify(ConnectionResetError()) == EXIT_LOST_PEER
    assert classify(ValueError("bug")) == 1
