"""ddp_train.errors: exit codes and the classification of failures (retryable or permanent)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from ddp_train.config.flags import build_parser
from ddp_train.errors import (
    EXIT_CODES,
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


DOCS = Path(__file__).resolve().parents[3] / "docs" / "ddp-train.md"


def documented_exit_codes() -> dict[int, str]:
    """docs/ddp-train.md's "Exit codes" table: code -> its "retry?" cell (yes, no or empty)."""
    section = DOCS.read_text(encoding="utf-8").split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \|.*\| *(yes|no|) *\|$", section, re.MULTILINE)
    return {int(code): retry for code, retry in rows}


def test_the_docs_table_lists_every_exit_code_and_whether_to_retry():
    documented = documented_exit_codes()
    assert len(documented) > 10
    assert documented == {code: {True: "yes", False: "no", None: ""}[again] for code, _, again in EXIT_CODES}


def test_every_exit_code_is_in_help_and_retryable_means_128_and_above():
    epilog = " ".join(build_parser().epilog.split())
    listed = epilog.split("exit codes: ", 1)[1]
    for code, meaning, again in EXIT_CODES:
        assert f"{code} {' '.join(meaning.split())}" in listed
        if again is not None:
            assert again == (code >= RETRYABLE_MIN), code
    assert "retryable: 128, 129, 143." in listed
