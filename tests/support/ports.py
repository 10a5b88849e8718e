"""Free TCP ports for the tests' listeners (rendezvous stores, Slurm daemons, the registry).

A port the kernel hands out for ``bind(0)`` comes from its ephemeral range, the same range every outgoing
connection takes its source port from; once the probing socket is closed, any connection this suite opens (a
TCP store client, the registry, a Slurm daemon) can take that port before the listener it was meant for binds
it, and that listener fails with EADDRINUSE (seen: a Slurm job's TCP store, its port rendered into the job
script minutes before the job started). So the port is drawn at random from below the ephemeral range, where
no outgoing connection lands, and checked free by binding it. The draw uses the system's random source, not
``random``'s generator, which pytest-randomly seeds alike at every test's start in every worker (the same ports
in the same order for all of them); so two workers meet on one port only by chance (about one in 20,000).
"""

from __future__ import annotations

import random
import socket

LOWEST = 10000  # above the well-known and registered ports that daemons here may hold
EPHEMERAL_DEFAULT = (32768, 60999)  # Linux's default net.ipv4.ip_local_port_range
_draw = random.SystemRandom()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (the default where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing on ``host`` holds now, outside the ephemeral range where possible."""
    low, high = ephemeral_range()
    candidates = [(LOWEST, low)] if low - LOWEST >= 1000 else []
    if 65536 - (high + 1) >= 1000:
        candidates.append((high + 1, 65536))
    for _ in range(200):
        if not candidates:
            break
        start, stop = _draw.choice(candidates)
        port = _draw.randrange(start, stop)
        if _bindable(host, port):
            return port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:  # no room outside the range: the kernel's choice
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` different free ports."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports
