"""``ddp-train-launch``: torchrun that exits with its workers' exit code.

torchrun exits with code 1 whenever a worker fails, whatever the worker's own code was. Kubernetes
``restartPolicy: ExitCode`` (PyTorchJob) restarts a pod only for exit codes >= 128 and fails the job for
lower ones, so behind plain torchrun every failure looks permanent and ddp-train's retryable codes (lost peer,
timeout: >= 128) never reach the operator. This wrapper runs torchrun's own ``main`` in-process (same flags,
same ``PET_*`` environment) and, when workers fail, exits with the root-cause worker's code; a worker killed
by signal N gives 128 + N, as a shell would report it.
"""

from __future__ import annotations

import sys


def failure_exit_code(exitcode: int) -> int:
    """A worker's exit status as the container's exit code (negative = killed by that signal)."""
    if exitcode < 0:
        return 128 + (-exitcode)
    return exitcode if exitcode > 0 else 1


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(list(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        code = failure_exit_code(failure.exitcode)
        print(f"ddp-train-launch: worker rank {rank} failed with exit code {failure.exitcode}; "
              f"exiting with {code}", file=sys.stderr, flush=True)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
