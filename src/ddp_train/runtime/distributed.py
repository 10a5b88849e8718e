"""How this process joins the job: torchrun env://, a manual --init-method, or alone."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlparse

import torch
import torch.distributed as dist

from ddp_train.config.flag_types import MAX_RANKS, shown
from ddp_train.config.run_config import RunConfig
from ddp_train.errors import EXIT_DEPENDENCY, EXIT_MASTER_UNREACHABLE, EXIT_USAGE, TrainError
from ddp_train.visible import visible

# Set once this process has joined a process group (it then leaves with os._exit, see __main__._exit).
JOINED = [False]


@dataclass
class Launch:
    mode: str  # "torchrun" | "env" | "tcp" | "file" | "single"
    rank: int
    world_size: int
    local_rank: int
    init_method: str | None
    master: tuple[str, int] | None  # the address non-zero ranks wait for
    socket_rule: str | None = None  # what socket_transport.apply did before NCCL started (nccl runs only)


ENV_FIX = "set it right where the job is launched (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and MASTER_* itself)"


def _int(raw, label: str, low: int, high: int, rule: str) -> int:
    """``raw`` (an environment variable's text or a flag's int) as an int from ``low`` to ``high``; else a usage
    error naming ``label`` (``RANK`` or ``--rank``), the value and ``rule``."""
    try:
        value = int(raw)
    except ValueError:
        raise TrainError(f"{label}={shown(str(raw))} is not an integer; {ENV_FIX}", EXIT_USAGE) from None
    if not low <= value <= high:
        raise TrainError(f"{label}={value} is out of range: {rule}; {ENV_FIX}", EXIT_USAGE)
    return value


def _checked(rank, world, local, *, names: tuple[str, str, str]) -> tuple[int, int, int]:
    """Rank, world size and local rank (from the environment or the flags, ``names`` says which) as ints that
    torch can use: world from 1 to MAX_RANKS, rank below world, local rank >= 0 (and below LOCAL_WORLD_SIZE)."""
    world = _int(world, names[1], 1, MAX_RANKS, f"the number of processes, from 1 to {MAX_RANKS}")
    rank = _int(rank, names[0], 0, world - 1, f"each of the {world} processes ({names[1]}={world}) has a rank "
                f"from 0 to {world - 1}")
    local_world = os.environ.get("LOCAL_WORLD_SIZE", "")
    top = MAX_RANKS - 1
    if local_world.strip().isdecimal() and names[2] == "LOCAL_RANK":
        top = max(0, min(top, int(local_world) - 1))
    local = _int(local, names[2], 0, top, f"this process's index on its node, from 0 to {top}"
                 + (f" (LOCAL_WORLD_SIZE={int(local_world)})" if top < MAX_RANKS - 1 else ""))
    return rank, world, local


def detect(config: RunConfig) -> Launch:
    """How this process joins the job, from the flags and the environment; a rank, world size, local rank or port
    that torch could not use (or that would leave the job waiting for a rank that never comes) is a usage error."""
    env = os.environ
    local_from = ("--local-rank", config.local_rank) if config.local_rank is not None else None
    if config.init_method and not config.init_method.startswith("env://"):
        url = urlparse(config.init_method)
        master = None
        if url.scheme == "tcp":
            try:
                port = url.port
            except ValueError:  # urllib: "Port out of range 0-65535", or not a number
                port = None
            if not url.hostname or not port:
                raise TrainError(f"--init-method {shown(config.init_method)} needs a host and a port from 1 to 65535: "
                                 "tcp://HOST:PORT", EXIT_USAGE)
            master = (url.hostname, port)
        # the GPU index defaults to the rank (pick_device takes it modulo the GPU count)
        from_env = ("LOCAL_RANK", env["LOCAL_RANK"]) if "LOCAL_RANK" in env else ("--rank", config.rank)
        label, raw = local_from or from_env
        rank, world, local = _checked(config.rank, config.world_size, raw, names=("--rank", "--world-size", label))
        return Launch(url.scheme, rank, world, local, config.init_method, master)
    if "RANK" in env and "WORLD_SIZE" in env or config.init_method == "env://":
        flags = config.rank is not None
        try:
            names = ("--rank", "--world-size") if flags else ("RANK", "WORLD_SIZE")
            rank_raw = config.rank if flags else env["RANK"]
            world_raw = config.world_size if flags else env["WORLD_SIZE"]
            label, local_raw = local_from or ("LOCAL_RANK", env.get("LOCAL_RANK", "0"))
            addr, port_raw = env["MASTER_ADDR"], env["MASTER_PORT"]
        except KeyError as exc:
            raise TrainError(f"env:// launch needs {exc.args[0]} in the environment; run under torchrun "
                             "or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT", EXIT_USAGE) from None
        rank, world, local = _checked(rank_raw, world_raw, local_raw, names=(*names, label))
        port = _int(port_raw, "MASTER_PORT", 1, 65535, "a TCP port, from 1 to 65535")
        if not addr or any(c.isspace() or not c.isprintable() for c in addr):
            raise TrainError(f"MASTER_ADDR={shown(addr)} is not a host name or address; set it to rank 0's host "
                             "where the job is launched (torchrun sets it itself)", EXIT_USAGE)
        mode = "torchrun" if "TORCHELASTIC_RUN_ID" in env or "TORCHELASTIC_RESTART_COUNT" in env else "env"
        return Launch(mode, rank, world, local, "env://", (addr, port))
    return Launch("single", 0, 1, config.local_rank or 0, None, None)


def wait_for_master(host, port, timeout, what="MASTER_ADDR:MASTER_PORT"):
    """Block until host:port accepts a TCP connection; raise a retryable error naming it after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    delay = 0.05
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, max(0.1, timeout))):
                return
        except socket.gaierror as exc:
            last = f"cannot resolve {host} ({exc.strerror or exc})"
        except OSError as exc:
            last = exc.strerror or str(exc)
        if time.monotonic() + delay > deadline:
            raise TrainError(
                f"the master {what} = {host}:{port} did not open within {timeout:g}s ({last}); start rank 0 "
                "first, check the address/port and firewalls, or wait longer with --connect-timeout",
                EXIT_MASTER_UNREACHABLE)
        time.sleep(delay)
        delay = min(1.0, delay * 2)


def pick_device(config: RunConfig, launch: Launch) -> torch.device:
    want = config.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TrainError("--device cuda but CUDA is not available here; use --device cpu", EXIT_DEPENDENCY)
    n = torch.cuda.device_count()
    if config.strategy == "dp":
        return torch.device("cuda", 0)
    local = launch.local_rank
    if launch.mode in ("tcp", "file") and config.local_rank is None:
        local = local % n  # one process per node in classic manual launches
    if local >= n:
        raise TrainError(f"local rank {local} has no GPU: only {n} visible; use --nproc-per-node {n} or fewer",
                         EXIT_USAGE)
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def resolve_backend(config: RunConfig, device) -> str:
    backend = config.backend
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    if backend == "nccl" and device.type != "cuda":
        raise TrainError("--backend nccl needs GPUs; use --backend gloo (or auto) on CPU", EXIT_USAGE)
    if backend == "nccl" and not dist.is_nccl_available():
        raise TrainError("this torch build has no NCCL; use --backend gloo", EXIT_DEPENDENCY)
    return backend


def round_store(launch: Launch, timeout: timedelta):
    """Under ddp-train-launch with torchrun's shared agent store: that store, seen through this rendezvous round's
    own namespace, so no key a worker of an earlier round left there (a dead peer's address) is read as this
    round's (round_store.py says why). None otherwise: the process group is opened from env:// as torch does."""
    from ddp_train.runtime.round_store import ROUND_ENV

    number = os.environ.get(ROUND_ENV, "")
    if launch.mode != "torchrun" or not number.isdigit() or launch.master is None \
            or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    host, port = launch.master
    shared = dist.TCPStore(host, port, world_size=launch.world_size, is_master=False, timeout=timeout)
    return dist.PrefixStore(f"ddp-train/round-{number}/", shared)


def init(config: RunConfig, launch: Launch, backend, device):
    if launch.mode == "single":
        return
    if launch.master and launch.rank != 0:
        what = "MASTER_ADDR:MASTER_PORT" if launch.mode in ("torchrun", "env") else "--init-method"
        wait_for_master(launch.master[0], launch.master[1], config.connect_timeout, what)
    kwargs = dict(backend=backend, init_method=launch.init_method, rank=launch.rank,
                  world_size=launch.world_size, timeout=timedelta(seconds=config.pg_timeout))
    if backend == "nccl":
        kwargs["device_id"] = device
        from ddp_train.comm.socket_transport import apply as apply_socket_rule

        launch.socket_rule = apply_socket_rule()  # before NCCL's first communicator reads the variables
    try:
        store = round_store(launch, kwargs["timeout"])
        if store is not None:
            del kwargs["init_method"]
            kwargs["store"] = store
        dist.init_process_group(**kwargs)
        JOINED[0] = True
    except TrainError:
        raise
    except Exception as exc:
        text = visible(str(exc).splitlines()[0], limit=200) if str(exc) else type(exc).__name__
        where = f"{launch.master[0]}:{launch.master[1]}" if launch.master else launch.init_method
        raise TrainError(f"process group init via {where} failed: {text}; check that all {launch.world_size} "
                         "ranks start with the same master and world size (--pg-timeout to wait longer)",
                         EXIT_MASTER_UNREACHABLE) from None


def log_err(msg):
    print(f"ddp-train: {visible(msg)}", file=sys.stderr, flush=True)
