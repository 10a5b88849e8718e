"""The tests' free ports (tests/support/ports.py): outside the kernel's ephemeral range, free, distinct."""

from __future__ import annotations

import socket

from ports import ephemeral_range, free_port, free_ports


def test_a_free_port_lies_outside_the_ephemeral_range_and_binds():
    low, high = ephemeral_range()
    for _ in range(20):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out():
    held = []
    try:
        for port in free_ports(30):
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        taken = {s.getsockname()[1] for s in held}
        assert len(taken) == 30
        assert all(free_port() not in taken for _ in range(50))
    finally:
        for s in held:
            s.close()
