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

from ddp_train.config.run_config import RunConfig
from ddp_train.errors import EXIT_DEPENDENCY, EXIT_MASTER_UNREACHABLE, EXIT_USAGE, TrainError

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


def detect(config: RunConfig) -> Launch:
    env = os.environ
    if config.init_method and not config.init_method.startswith("env://"):
        url = urlparse(config.init_method)
        master = None
        if url.scheme == "tcp":
            if not url.hostname or not url.port:
                raise TrainError(f"--init-method {config.init_method} needs a host and a port: tcp://HOST:PORT",
                                 EXIT_USAGE)
            master = (url.hostname, url.port)
        local = config.local_rank if config.local_rank is not None else int(env.get("LOCAL_RANK", config.rank))
        return Launch(url.scheme, config.rank, config.world_size, local, config.init_method, master)
    if "RANK" in env and "WORLD_SIZE" in env or config.init_method == "env://":
        try:
            rank = int(env["RANK"]) if config.rank is None else config.rank
            world = int(env["WORLD_SIZE"]) if config.world_size is None else config.world_size
            local = config.local_rank if config.local_rank is not None else int(env.get("LOCAL_RANK", "0"))
            addr, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        except KeyError as exc:
            raise TrainError(f"env:// launch needs {exc.args[0]} in the environment; run under torchrun "
                             "or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT", EXIT_USAGE) from None
        except ValueError as exc:
            raise TrainError(f"bad torchrun environment ({exc}); RANK/WORLD_SIZE/LOCAL_RANK/MASTER_PORT must be "
                             "integers", EXIT_USAGE) from None
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
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        where = f"{launch.master[0]}:{launch.master[1]}" if launch.master else launch.init_method
        raise TrainError(f"process group init via {where} failed: {text}; check that all {launch.world_size} "
                         "ranks start with the same master and world size (--pg-timeout to wait longer)",
                         EXIT_MASTER_UNREACHABLE) from None


def log_err(msg):
    print(f"ddp-train: {msg}", file=sys.stderr, flush=True)
