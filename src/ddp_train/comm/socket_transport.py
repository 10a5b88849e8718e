"""NCCL's socket transport settings for clusters joined by TCP (Ethernet) rather than InfiniBand.

NCCL's defaults for its socket transport (``NCCL_SOCKET_NTHREADS=1``, ``NCCL_NSOCKS_PERTHREAD=1`` on most
hosts) drive one TCP stream per connection from one helper thread. Over a fast Ethernet that leaves most of
the link unused: on one 4 x H200 host with NCCL forced onto sockets over loopback (two torchrun agents of two
GPUs each), the all-reduce probe measured 2.1 GB/s busbw at 256 MiB with the defaults and 4.3-4.8 GB/s with
4 threads of 4 sockets each (docs/BENCHMARKS.md, "network-bound").

The rule, applied at run time inside the node (where the hardware is known), when ``DDP_TRAIN_NCCL_SOCKETS``
is ``auto`` (what ddpctl's launch contract sets for multi-node GPU jobs, see :mod:`ddpctl.launch`):

- an InfiniBand device under ``/sys/class/infiniband`` that NCCL may use (no ``NCCL_IB_DISABLE=1``, no
  ``NCCL_NET=Socket``): nothing is set, NCCL takes the IB transport and these settings do not apply;
- otherwise ``NCCL_SOCKET_NTHREADS=4`` and ``NCCL_NSOCKS_PERTHREAD=4`` (NCCL allows at most 64 sockets per
  connection in all), each only where the environment does not set it already: a user's own value wins.

``DDP_TRAIN_NCCL_SOCKETS=off`` (or unset) leaves the environment alone. Applied by ``ddp-train-launch`` before
it starts torchrun (so any training command it starts inherits it) and by ``ddp-train`` and the all-reduce
probe before their process group is created (NCCL reads these variables when its first communicator is made).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

MODE_ENV = "DDP_TRAIN_NCCL_SOCKETS"
IB_DIR = "/sys/class/infiniband"
SOCKET_SETTINGS = {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}


def infiniband_devices(ib_dir: str = IB_DIR) -> list[str]:
    try:
        return sorted(os.listdir(ib_dir))
    except OSError:
        return []


def socket_settings(environ: MutableMapping[str, str], ib_dir: str = IB_DIR) -> tuple[dict[str, str], str]:
    """What the rule would set (only variables not set already) and why, without changing ``environ``."""
    mode = (environ.get(MODE_ENV) or "off").strip().lower()
    if mode not in ("auto", "on"):
        return {}, f"{MODE_ENV}={mode}: NCCL socket settings left as they are"
    ib = infiniband_devices(ib_dir)
    ib_usable = ib and environ.get("NCCL_IB_DISABLE", "0") != "1" and environ.get("NCCL_NET", "").lower() != "socket"
    if ib_usable and mode == "auto":
        return {}, f"InfiniBand found ({', '.join(ib[:3])}): NCCL uses it, socket settings left alone"
    add = {k: v for k, v in SOCKET_SETTINGS.items() if k not in environ}
    kept = [f"{k}={environ[k]}" for k in SOCKET_SETTINGS if k in environ]
    why = "no usable InfiniBand" if mode == "auto" else f"{MODE_ENV}=on"
    what = " ".join(f"{k}={v}" for k, v in add.items()) or "nothing"
    return add, f"{why}: set {what}" + (f" (kept the environment's {' '.join(kept)})" if kept else "")


def apply(environ: MutableMapping[str, str] | None = None, ib_dir: str = IB_DIR) -> str:
    """Apply the rule to ``environ`` (default ``os.environ``); returns the one-line reason."""
    env = os.environ if environ is None else environ
    add, why = socket_settings(env, ib_dir)
    env.update(add)
    return why
