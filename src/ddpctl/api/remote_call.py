"""The program ``ddpctl.run`` starts on every rank: ``python remote_call.py DIR``.

It is copied into the job's run directory (mounted at the same path in every container) and runs there with
the image's Python, so it uses the standard library and cloudpickle only (the ddpctl images carry cloudpickle;
another image needs ``pip install cloudpickle``). It loads the call from ``DIR/call.pkl``, runs it, and writes
the rank's record ``DIR/results/rank-R.pkl`` (atomically): the return value, the exception with its traceback,
or why the value cannot be serialised. torch is never imported here; when the function initialised a process
group, it is destroyed before the process exits.
"""

import json
import os
import pickle
import sys
import time
import traceback

MAX_TEXT = 20_000  # characters of a message or traceback in a record


def _write(directory, rank, record):
    results = os.path.join(directory, "results")
    path = os.path.join(results, "rank-%d.pkl" % rank)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def _error(kind, exc_type, message, tb="", exception=None):
    return {"kind": kind, "type": exc_type, "message": message[:MAX_TEXT], "traceback": tb[-MAX_TEXT:],
            "exception": exception, "time": time.time()}


def _end_process_group():
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the value is already written; a teardown error must not hide it
        pass


def main(directory):
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    want = tuple(meta["python"])
    if tuple(sys.version_info[:2]) != want:
        _write(directory, rank, _error(
            "setup", "PythonVersionMismatch",
            "the image runs Python %d.%d but the caller runs Python %d.%d, and a function travels as that "
            "version's bytecode" % (sys.version_info[0], sys.version_info[1], want[0], want[1])))
        return 3
    try:
        import cloudpickle
    except ImportError:
        _write(directory, rank, _error("setup", "ModuleNotFoundError",
                                       "the image has no cloudpickle, which carries the function to the ranks"))
        return 3
    try:
        with open(os.path.join(directory, "call.pkl"), "rb") as f:
            fn, args = cloudpickle.load(f)
    except Exception as exc:  # noqa: BLE001 - reported to the caller with its traceback
        _write(directory, rank, _error("load", type(exc).__name__, str(exc), traceback.format_exc()))
        return 3
    try:
        value = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are the function's too
        traceback.print_exc()  # in the job's output too ('ddpctl logs'), its last line the launcher's root cause
        sys.stderr.flush()
        try:
            pickled = cloudpickle.dumps(exc)
        except Exception:  # noqa: BLE001 - the type and text still travel
            pickled = None
        _write(directory, rank, _error("error", type(exc).__module__ + "." + type(exc).__qualname__, str(exc),
                                       traceback.format_exc(), pickled))
        _end_process_group()
        return 1
    try:
        data = cloudpickle.dumps(value)
    except Exception as exc:  # noqa: BLE001 - any reason a value cannot be pickled
        _write(directory, rank, _error("unserialisable", type(value).__module__ + "." + type(value).__qualname__,
                                       "%s: %s" % (type(exc).__name__, exc)))
        _end_process_group()
        return 0
    _write(directory, rank, {"kind": "value", "value": data, "time": time.time()})
    _end_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
