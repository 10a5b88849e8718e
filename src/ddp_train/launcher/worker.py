"""How ``ddp-train-launch`` runs a worker that is a Python program: ``python [flags] -m ddp_train.launcher.worker
SCRIPT [args]`` (or ``... worker -m MODULE [args]``) in place of ``python [flags] SCRIPT [args]``.

Why: a program that leaves its process group open reaches interpreter finalisation with gloo's (or NCCL's)
connections and threads alive, and any thread still inside a torch call then (a library's daemon thread
waiting on a collective or a store, a future's callback) aborts the process when the call returns: CPython
3.11 ends a thread that takes the GIL during finalisation with ``pthread_exit``, whose forced unwinding through
torch's C++ frames calls ``std::terminate`` ("terminate called without an active exception", SIGABRT, exit 134)
after the program had finished. It comes with several nodes because the call returns when a peer on another node
tears its connections down, which happens while this process is finalising only when the two end at about the
same time.

What this runner does, after the program (``runpy``, as ``python SCRIPT`` / ``python -m MODULE`` would run it):

1. notes the end of the program and its exit code for the launcher (:data:`ENDED_DIR_ENV`): the launcher bounds
   the time from there to the process's exit (a thread or exit handler that never returns), and a rank its agent
   stopped while it was still leaving keeps its program's code in the root-cause line (another rank may fail on
   the lost connection and exit first), see :mod:`ddp_train.launcher.exits`;
2. the interpreter's own first steps of shutdown, in its order: ``threading``'s exit hooks, the join of every
   non-daemon thread, the ``atexit`` handlers (the program's, its libraries');
3. ends the process group the program left open (``destroy_process_group``), saying so once (rank 0) when the
   program finished well (after a failure the group is open because of it, and the failure's own last line
   must stay the rank's last line: it is what the root-cause line names);
4. leaves: with the program's exit code through ``os._exit`` when the program used ``torch.distributed``
   (after flushing every open file object and the C library's output buffers, as finalisation and ``exit``
   would), so that finalisation never meets torch's C++ threads and objects; else through normal finalisation.
   Ending the process group is not enough: a thread waiting on a peer holds the group's connections until the
   peer closes them, and an object the program keeps (a ``DistributedDataParallel`` model holds its process
   group even after ``destroy_process_group``) is torn down only during finalisation, where gloo's worker
   threads may still hold tensors whose release takes the GIL: the same abort after a program that called
   ``destroy_process_group`` itself (seen on a two-node Slurm job of PyTorch's plain DDP tutorial script).
   What finalisation would still do is free memory and call the ``__del__`` of objects alive at exit, which
   Python does not promise to call.

The exit code is the program's: ``sys.exit(n)`` / ``SystemExit`` as Python maps it, 1 after an uncaught
exception (its traceback printed by ``sys.excepthook``), and a signal's death stays a signal's death.
"""

from __future__ import annotations

import os
import sys

ENDED_DIR_ENV = "DDP_TRAIN_LAUNCH_ENDED_DIR"  # where a worker notes the end of its program (set by the launcher)
NOTE = ("ddp-train-launch: the program left its process group open at exit; ended it (destroy_process_group) "
        "before the interpreter's teardown")


def _usage() -> int:
    print("usage: python -m ddp_train.launcher.worker SCRIPT [ARGS...] | -m MODULE [ARGS...]", file=sys.stderr)
    return 2


def exit_code_of(exc: SystemExit) -> int:
    """The exit status Python gives ``SystemExit(code)``: None 0, an int itself, anything else printed and 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # what the operating system keeps of it
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - a broken stderr: the code stays 1
        pass
    return 1


def note_end(directory: str | None, code: int = 0) -> None:
    """One small file per process (``<pid>``: rank, pid, start time, the program's exit code, non-daemon threads
    alive): the launcher's exit watchdog reads it (ddp_train.launcher.exits), and the root-cause line takes the
    program's own exit code from it when the agent stopped the process after its program had ended."""
    if not directory:
        return
    import json
    import threading
    import time

    try:
        with open(f"/proc/{os.getpid()}/stat") as fh:
            start = fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        start = ""
    alive = [t.name[:60] for t in threading.enumerate()
             if t is not threading.current_thread() and not t.daemon and t.is_alive()][:8]
    body = json.dumps({"rank": os.environ.get("RANK", ""), "pid": os.getpid(), "start": start,
                       "ended": time.time(), "code": int(code), "threads": alive})
    path = os.path.join(directory, str(os.getpid()))
    try:
        with open(path + ".tmp", "w") as fh:
            fh.write(body)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the launcher's directory is gone (it is ending): nothing to bound


def close_process_group() -> bool:
    """End the default process group if the program left it open; True if it did."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return False
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return False
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - a peer already gone: nothing left to end in order
        from ddp_train.visible import visible  # here: the program's own run imports nothing of ddp_train

        first = visible((str(exc).strip().splitlines() or [""])[0], limit=200)
        print(f"ddp-train-launch: ending the process group the program left open failed "
              f"({type(exc).__name__}: {first})", file=sys.stderr, flush=True)
        return False
    return True


def _flush_open_files() -> None:
    """What finalisation would do for files the program left open: flush them (``os._exit`` does not)."""
    import gc
    import io

    for obj in gc.get_objects():
        if issubclass(type(obj), io.IOBase):  # type(): no attribute of the object is read
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # noqa: BLE001 - a broken file is the program's business
                pass


def _shutdown_threads_and_handlers() -> None:
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)  # threading's exit hooks, then the non-daemon threads joined
    if shutdown is not None:
        shutdown()
    else:  # pragma: no cover - every CPython this runs on has it
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
    atexit._run_exitfuncs()


def run(argv: list[str]) -> int:
    import runpy

    ended_dir = os.environ.pop(ENDED_DIR_ENV, None)  # this process only, not the program's own children
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        return _usage()
    code = 0
    try:
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                script = argv[0]
                sys.argv = list(argv)
                sys.path[0] = os.path.dirname(os.path.realpath(script))  # as `python SCRIPT` has it
                runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exit_code_of(exc)
        except KeyboardInterrupt:
            raise  # Python's own handling: the traceback and death by SIGINT
        except BaseException:  # noqa: BLE001 - as the interpreter does: the traceback, then exit code 1
            sys.excepthook(*sys.exc_info())
            code = 1
        note_end(ended_dir, code)
        _shutdown_threads_and_handlers()
    except SystemExit as exc:  # an exit handler's sys.exit wins, as in the interpreter
        code = exit_code_of(exc)
    distributed = "torch.distributed" in sys.modules
    if close_process_group() and code == 0 and os.environ.get("RANK", "0") == "0":
        print(NOTE, file=sys.stderr, flush=True)
    if distributed:
        _flush_open_files()
        _flush_c_stdio()
        os._exit(code)
    return code


def _flush_c_stdio() -> None:
    """What the C library's ``exit`` does and ``os._exit`` does not: flush its stdio buffers (a C extension's
    ``printf`` into a pipe)."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask: nothing buffered there
        pass


def main() -> int:
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
