"""Checks of this host's limits and network: /dev/shm, memlock, stack, port, InfiniBand, NCCL interface."""

from __future__ import annotations

from ddpctl.doctor.engine_checks import mib
from ddpctl.doctor.model import NOT_A_NIC, PREFETCH, SHM_PER_WORKER_BATCH, STACK_MIN, Check, Options, Probes

# -------------------------------------------------------------------------------- host checks

def check_shm(opts: Options, p: Probes, state: dict) -> Check:
    size = p.shm_bytes()
    need = opts.procs * opts.workers * PREFETCH * SHM_PER_WORKER_BATCH
    basis = (f"{opts.procs} process(es) x {opts.workers} DataLoader worker(s) x {PREFETCH} prefetched batches "
             f"x {mib(SHM_PER_WORKER_BATCH)}")
    if size is None:
        return Check("/dev/shm", "fail", "no /dev/shm on this host",
                     "mount a tmpfs on /dev/shm (mount -t tmpfs -o size=16g tmpfs /dev/shm)")
    if need and size < need:
        return Check("/dev/shm", "warn", f"{mib(size)}, less than {mib(need)} for {basis}",
                     f"grow it (mount -o remount,size={-(-need // 1024**3)}g /dev/shm) or use fewer --workers "
                     "(ddp-train's device data pipeline needs none)")
    return Check("/dev/shm", "ok", f"{mib(size)} (>= {mib(need)} for {basis})")


def _limit(v: int) -> str:
    return "unlimited" if v < 0 else mib(v)


def check_memlock(opts: Options, p: Probes, state: dict) -> Check:
    soft, _ = p.rlimit("memlock")
    where = ("this shell's limit (jobs inherit it)" if opts.target == "slurm" else
             "this host's limit; containers get 'memlock: true' from the job file instead")
    if soft < 0:
        return Check("memlock ulimit", "ok", f"unlimited ({where})")
    status = "warn" if opts.gpus_per_node else "ok"
    return Check("memlock ulimit", status, f"{_limit(soft)} ({where}); NCCL over InfiniBand/RoCE wants unlimited",
                 "set 'memlock unlimited' in /etc/security/limits.conf (Slurm: PropagateResourceLimits), "
                 "or 'memlock: true' in the job file for containers")


def check_stack(opts: Options, p: Probes, state: dict) -> Check:
    soft, _ = p.rlimit("stack")
    if soft < 0 or soft >= STACK_MIN:
        return Check("stack ulimit", "ok", _limit(soft))
    in_containers = opts.target in ("local", "compose")
    return Check("stack ulimit", "ok" if in_containers else "warn",
                 f"{_limit(soft)} on this host" + (" (containers get 64 MiB from ddpctl)" if in_containers else
                                                   f", below the {_limit(STACK_MIN)} NVIDIA recommends"),
                 "ulimit -s 65536 (or 'stack 65536' in /etc/security/limits.conf)")


def check_port(opts: Options, p: Probes, state: dict) -> Check:
    if p.port_free(opts.port):
        return Check("master port", "ok", f"{opts.port} free on this host")
    host_net = opts.network == "host" or opts.target == "slurm"
    detail = f"{opts.port} is in use on this host"
    if opts.target in ("local", "compose") and opts.network != "host":
        detail += " (only matters with network: host; the job's bridge network has its own ports)"
    return Check("master port", "fail" if opts.target in ("local", "compose") and host_net else "warn", detail,
                 "pick a free port with --port, or stop what listens there")


def check_ib(opts: Options, p: Probes, state: dict) -> Check:
    devices = sorted(p.listdir("/sys/class/infiniband") or [])
    if devices:
        return Check("InfiniBand", "ok", f"devices: {', '.join(devices)} (NCCL uses them unless NCCL_IB_DISABLE=1)")
    multi = opts.nodes > 1 and opts.gpus_per_node > 0
    return Check("InfiniBand", "warn" if multi else "ok",
                 "no devices under /sys/class/infiniband: NCCL uses TCP sockets between nodes",
                 "expect lower multi-node bandwidth; install the IB driver (rdma-core, MOFED) if the hosts have HCAs")


def _interfaces(p: Probes) -> list[str]:
    return sorted(p.listdir("/sys/class/net") or [])


def check_socket_ifname(opts: Options, p: Probes, state: dict) -> Check:
    nics = _interfaces(p)
    candidates = [n for n in nics if not NOT_A_NIC.match(n)
                  and (p.read(f"/sys/class/net/{n}/operstate") or "up").strip() in ("up", "unknown")]
    value = p.env.get("NCCL_SOCKET_IFNAME")
    if value:
        spec = value.lstrip("^=")
        prefixes = [x for x in spec.split(",") if x]
        exact = value.lstrip("^").startswith("=")
        if value.startswith("^"):
            left = [n for n in nics if not any((n == x) if exact else n.startswith(x) for x in prefixes)]
            ok = bool([n for n in left if n != "lo"])
        else:
            ok = any((n == x) if exact else n.startswith(x) for n in nics for x in prefixes)
        if not ok:
            return Check("NCCL_SOCKET_IFNAME", "fail", f"{value!r} matches no interface here "
                         f"(interfaces: {', '.join(nics) or 'none'})",
                         f"set it to one of: {', '.join(candidates) or 'an interface that reaches the other nodes'}")
        return Check("NCCL_SOCKET_IFNAME", "ok", f"{value!r} matches an interface here")
    if not candidates:
        return Check("NCCL_SOCKET_IFNAME", "warn" if opts.nodes > 1 else "ok",
                     "no candidate interface (only loopback/virtual ones)",
                     "connect the hosts, or set NCCL_SOCKET_IFNAME (nccl.socket_ifname) to the right interface")
    return Check("NCCL_SOCKET_IFNAME", "ok", f"unset; candidates: {', '.join(candidates)} "
                 "(set nccl.socket_ifname when hosts have several)")
