"""ddp-train's failure contract: exit codes, the error type mapped to them, and the texts that mean a lost peer
(read by ``classify`` here, by the launcher, ``ddp_train.launcher.run``, and by ``ddpctl``'s executor from the
output, which cannot import this module and tests against these texts).

Codes below 128 are permanent (retrying the same command cannot help); codes of 128 and above are
retryable (a peer or the master went away, a collective timed out), so that Kubernetes
``restartPolicy: ExitCode`` / ``podFailurePolicy`` can restart only what may succeed on a retry.
"""

from __future__ import annotations

import math
import os

EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug or an unexpected error (permanent)
EXIT_USAGE = 2  # bad arguments or an impossible combination
EXIT_DATA = 3  # missing or corrupt data set files
EXIT_SYNC = 4  # the sync check (or `compare`) found ranks/checkpoints that differ
EXIT_CHECKPOINT = 5  # a checkpoint asked for cannot be loaded or does not fit this run
EXIT_DEPENDENCY = 6  # an optional dependency (torchvision, CUDA) is needed but missing
EXIT_STORAGE = 7  # a checkpoint cannot be written (disk full, read-only mount, no permission): retrying cannot help
EXIT_HUNG = 124  # (ddp-train-launch) a rank whose program ended but whose process did not exit (timeout(1)'s code)
EXIT_MASTER_UNREACHABLE = 128  # MASTER_ADDR:MASTER_PORT never opened within --connect-timeout
EXIT_LOST_PEER = 129  # a peer died, a connection closed or a collective timed out
# Stopped on SIGTERM/SIGUSR1 (eviction, preemption, Slurm's --signal) after saving a checkpoint at the step
# all ranks agreed on: 128 + SIGTERM, as a shell or container engine reports a process stopped by SIGTERM.
EXIT_PREEMPTED = 143
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports it

RETRYABLE_MIN = 128

# Every exit code, once: (code, what it means in --help, whether a restart can help: True, False, or None where
# the question does not arise). ``ddp-train --help`` is generated from it; docs/ddp-train.md's table is tested
# against it (tests/unit/ddp_train/test_errors.py).
EXIT_CODES: tuple[tuple[int, str, bool | None], ...] = (
    (EXIT_OK, "ok", None),
    (EXIT_INTERNAL, "internal error", False),
    (EXIT_USAGE, "bad arguments or environment", False),
    (EXIT_DATA, "missing/corrupt data", False),
    (EXIT_SYNC, "sync check failed", False),
    (EXIT_CHECKPOINT, "checkpoint unusable", False),
    (EXIT_DEPENDENCY, "missing dependency", False),
    (EXIT_STORAGE, "checkpoint not writable", False),
    (EXIT_HUNG, "(ddp-train-launch) a program ended but its process did not exit", False),
    (EXIT_MASTER_UNREACHABLE, "master unreachable", True),
    (EXIT_LOST_PEER, "lost peer / timeout", True),
    (EXIT_INTERRUPTED, "interrupted", None),
    (EXIT_PREEMPTED, "stopped by SIGTERM/SIGUSR1 after its checkpoint", True),
)


def exit_codes_help(width: int = 110) -> str:
    """The exit codes as ``--help`` lists them (from :data:`EXIT_CODES`), wrapped between codes, never inside one."""
    retry = ", ".join(str(code) for code, _, again in EXIT_CODES if again)
    items = [f"{code} {meaning}," for code, meaning, _ in EXIT_CODES[:-1]]
    items += [f"{EXIT_CODES[-1][0]} {EXIT_CODES[-1][1]};", f"retryable: {retry}."]
    lines = ["exit codes:"]
    for item in items:
        if len(lines[-1]) + 1 + len(item) > width:
            lines.append(" ")
        lines[-1] += " " + item
    return "\n".join(lines)

class TrainError(Exception):
    """A one-line, user-facing error with its exit code. The message names the problem and the fix."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code

    @property
    def retryable(self) -> bool:
        return self.code >= RETRYABLE_MIN


def env_number(name: str, *, high: float, fix: str) -> float | None:
    """The positive, finite number (at most ``high``) that environment variable ``name`` holds; None when it is
    unset or empty. Any other text (``abc``, ``0``, ``-5``, ``nan``, ``inf``) is a one-line usage error that ends
    with ``fix``: a setting given wrong is never silently replaced by the default."""
    raw = os.environ.get(name, "")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= high:  # NaN too
        raise TrainError(f"{name}={raw[:40]!r} is not a positive number (at most {high:g}); {fix}", EXIT_USAGE)
    return value


class Preempted(TrainError):
    """A requested stop (SIGTERM/SIGUSR1) that ended in a checkpoint (or with nothing to save): retryable."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_PREEMPTED)


# The text ddp-train's own error line and the launcher's root-cause line carry for a lost peer or timeout.
LOST_PEER_TEXT = "lost a peer"

# An exception whose text has one of these (lowercase) escaped the loop because of the network or a peer:
# retryable (EXIT_LOST_PEER).
RETRYABLE_ERROR_MARKERS = (
    "connection closed by peer",
    "connection reset",
    "broken pipe",
    "timed out",
    "timeout",
    "socket",
    "nccl",
    "gloo",
    "watchdog",
    "heartbeat",
    "rendezvous",
    "tcpstore",
)


# A worker's error line with one of these (lowercase) means it failed because a peer went away (the launcher
# then blames another rank, if one failed for a reason of its own).
LOST_PEER_LINE_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "remote worker crashing",
    "remote process exited",
    LOST_PEER_TEXT,
    "distnetworkerror",
    "connection refused",
)
LOST_PEER_CODES = (EXIT_MASTER_UNREACHABLE, EXIT_LOST_PEER)

# torchrun's agent failed with one of these: it could not reach the store or finish the rendezvous (exit
# EXIT_MASTER_UNREACHABLE, retryable).
AGENT_NETWORK_ERRORS = ("DistNetworkError", "DistStoreError", "RendezvousError", "RendezvousTimeoutError",
                        "RendezvousConnectionError", "RendezvousClosedError", "RendezvousStateError")


# NCCL refused the call itself (ncclInvalidUsage, ncclInvalidArgument): a setting such as NCCL_ALGO=Tree that this
# topology or collective cannot run, not a network fault, so a restart would fail the same way (EXIT_USAGE).
NCCL_REFUSAL_MARKERS = ("invalid usage", "invalid argument")


def is_nccl_refusal(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "nccl" in text and any(m in text for m in NCCL_REFUSAL_MARKERS)


def looks_like_lost_peer(line: str) -> bool:
    low = line.lower()
    return any(m in low for m in LOST_PEER_LINE_MARKERS)


def classify(exc: BaseException) -> int:
    """Exit code for an exception that escaped the training loop."""
    if isinstance(exc, TrainError):
        return exc.code
    if is_nccl_refusal(exc):
        return EXIT_USAGE
    try:
        import torch.distributed as dist

        dist_errors = tuple(
            getattr(dist, n) for n in ("DistBackendError", "DistNetworkError", "DistStoreError") if hasattr(dist, n)
        )
        if dist_errors and isinstance(exc, dist_errors):
            return EXIT_LOST_PEER
    except ImportError:  # pragma: no cover - torch is a hard dependency of ddp_train
        pass
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return EXIT_LOST_PEER
    if isinstance(exc, RuntimeError):
        text = str(exc).lower()
        if any(m in text for m in RETRYABLE_ERROR_MARKERS):
            return EXIT_LOST_PEER
    return EXIT_INTERNAL
