"""Free local ports for clusters started by tests, benchmarks and demos."""

from __future__ import annotations

import socket
from pathlib import Path

from kafeed.errors import BrokerError


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux; IANA's elsewhere)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low, high = (int(v) for v in text.split())
    except (OSError, ValueError):
        return 49152, 65535
    return low, high


def free_port_block(count: int, *, start: int = 20000, stop: int | None = None) -> int:
    """A port ``p`` such that ``p .. p+count-1`` are all free on 127.0.0.1 now.

    Picked below the ephemeral range by default: a port that is free now but ephemeral
    can be taken by any outgoing connection before the broker binds it.
    """
    import random

    if stop is None:
        low, _high = _ephemeral_range()
        stop = low if low - start > 1000 + count else 60000
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(start, stop - count)
        if all(port_free(base + i) for i in range(count)):
            return base
    raise BrokerError(f"Found no {count} consecutive free ports between {start} and {stop}.")
