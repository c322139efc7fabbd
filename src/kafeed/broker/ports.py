"""Free local ports for clusters started by tests, benchmarks and demos."""

from __future__ import annotations

import socket

from kafeed.errors import BrokerError


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(count: int, *, start: int = 20000, stop: int = 60000) -> int:
    """A port ``p`` such that ``p .. p+count-1`` are all free on 127.0.0.1 now."""
    import random

    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(start, stop - count)
        if all(port_free(base + i) for i in range(count)):
            return base
    raise BrokerError(f"Found no {count} consecutive free ports between {start} and {stop}.")


