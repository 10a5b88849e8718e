"""Job restarts of ``ddpctl up --max-restarts N``: the rules, as pure functions (no I/O).

When a node exits with a retryable code (>= 128: killed by a signal, OOM-killed, a lost peer, the master
unreachable) and restarts are left, the whole job restarts: every node's container is recreated and they
rejoin; a code below 128 is permanent and ends the job at once. Training continues from the last checkpoint
in the job's checkpoint directory, :data:`CHECKPOINT_DIR` in every node:

- a named volume ``<job>-ckpt`` that ddpctl creates with the job's labels (``ps``/``down`` find it, ``down``
  and a replacing ``up`` remove it), unless the spec already mounts something there (``-v /shared:/checkpoints``,
  a directory every host sees: the user's, never removed);
- ``ddp-train`` gets ``--output-dir /checkpoints`` when its command line names none, and on every restart
  ``--resume auto`` (replacing a ``--resume PATH``: the job continues from its own newest checkpoint);
- any other command reads ``DDPCTL_CHECKPOINTS`` and ``DDPCTL_RESTART_COUNT`` (0 on the first start).

torchrun in the containers gets no ``--max-restarts`` of its own: with a static rendezvous it could restart
only one node's workers, and a killed container takes its torchrun with it; ddpctl restarts the job.
"""

from __future__ import annotations

from ddpctl import launch

CHECKPOINT_DIR = launch.CHECKPOINT_DIR
CHECKPOINT_ENV = launch.SLURM_CHECKPOINT_ENV  # the same name on every target
RESTART_ENV = "DDPCTL_RESTART_COUNT"
LABEL_RESTARTS = "ddpctl.restarts"  # on each container: how many times the job was restarted before it
RETRYABLE_MIN = 128  # as ddp-train's exit codes and Kubernetes restartPolicy: ExitCode


def retryable(code: int) -> bool:
    """May a node that exited with ``code`` succeed on a restart? (>= 128: signal, OOM, lost peer.)"""
    return code >= RETRYABLE_MIN


volume_name = launch.checkpoint_volume


def ddp_train_at(argv: list[str]) -> int | None:
    """Index of ``ddp-train`` in a node's argv (the word after the launcher's ``--no-python``), or None."""
    try:
        i = argv.index("--no-python") + 1
    except ValueError:
        return None
    if i < len(argv) and argv[i].rsplit("/", 1)[-1] == "ddp-train":
        return i
    return None


def _has_flag(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def first_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The node argv of the first start: ddp-train writes its checkpoints to the job's checkpoint directory."""
    out = list(argv)
    i = ddp_train_at(out)
    if i is not None and not _has_flag(out[i + 1:], "--output-dir"):
        out += ["--output-dir", CHECKPOINT_DIR]
    return tuple(out)


def restart_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The node argv of a restart: ddp-train resumes from the newest valid checkpoint (``--resume auto``)."""
    out = list(first_argv(argv))
    i = ddp_train_at(out)
    if i is None:
        return tuple(out)
    args, cleaned, skip = out[i + 1:], [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--resume":
            skip = True
            continue
        if a.startswith("--resume="):
            continue
        cleaned.append(a)
    return tuple(out[:i + 1] + cleaned + ["--resume", "auto"])


def checkpoint_cadence_note(argv: tuple[str, ...]) -> str | None:
    """A hint when ddp-train would checkpoint only at epoch ends (a restart would then redo a whole epoch)."""
    i = ddp_train_at(list(argv))
    if i is None:
        return None
    args = list(argv[i + 1:])
    if _has_flag(args, "--checkpoint-every") or _has_flag(args, "--checkpoint-interval"):
        return None
    return ("note: ddp-train saves checkpoints only at epoch ends, so a restart redoes up to a whole epoch; "
            "add '--checkpoint-every N' to its command to lose at most N steps")
