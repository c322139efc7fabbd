"""A quick look at the bootstrap servers before any librdkafka client is asked anything.

librdkafka reports an unreachable cluster only when a metadata request times out
(11-18 s with kafeed's timeouts) and then cannot say why. :func:`check_reachable`
resolves every bootstrap address and opens one TCP connection to each, all in
parallel, and returns as soon as one accepts; when none does it raises
:class:`BrokerUnavailable` naming each address and its cause (connection
refused, host name does not resolve, no answer) within ``timeout`` seconds.
On a reachable cluster it costs one TCP handshake.

It checks that something listens, not that it speaks Kafka: the librdkafka call
that follows still has its own timeout.
"""

from __future__ import annotations

import queue
import socket
import threading
import time

from kafeed.config import ConnectionSettings, parse_bootstrap
from kafeed.errors import BrokerUnavailable

#: Seconds the probe may take in all; a broker that needs longer to accept a TCP
#: connection is, for a command-line user, not there.
PROBE_TIMEOUT_S = 3.0
LAST_TRY_S = 0.2  # the first address's connect, when the probe itself started late

_NOT_FOUND = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _probe(host: str, port: int, deadline: float, timeout: float) -> str | None:
    """None when ``host:port`` accepts a TCP connection, else why not in a few words."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in _NOT_FOUND:
            return "host name does not resolve"
        return f"host name could not be resolved: {str(exc.strerror).lower()}"
    cause = "no address to connect to"
    for index, (family, kind, proto, _, addr) in enumerate(infos):
        remaining = deadline - time.monotonic()
        if remaining <= 0 and index > 0:
            break
        try:
            with socket.socket(family, kind, proto) as sock:
                # The first address is tried even past the deadline: on a busy machine this
                # thread may first run then, and a local broker answers in microseconds.
                sock.settimeout(max(remaining, LAST_TRY_S))
                sock.connect(addr)
            return None
        except ConnectionRefusedError:
            cause = "connection refused"
        except TimeoutError:
            cause = f"no answer within {timeout:g}s"
        except OSError as exc:
            cause = str(exc.strerror or exc).lower()
    return cause


def check_reachable(settings: ConnectionSettings, *, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Return once a bootstrap server accepts a TCP connection; else :class:`BrokerUnavailable`.

    Daemon threads, not an executor: a name lookup cannot be cancelled, and a stuck
    one must not keep the process alive at exit.
    """
    servers = parse_bootstrap(settings.bootstrap)
    deadline = time.monotonic() + timeout
    answers: queue.Queue[tuple[str, str | None]] = queue.Queue()
    for host, port in servers:

        def run(host: str = host, port: int = port) -> None:
            answers.put((_address(host, port), _probe(host, port, deadline, timeout)))

        threading.Thread(target=run, name="kafeed-probe", daemon=True).start()
    causes: dict[str, str] = {}
    for _ in servers:
        try:
            address, cause = answers.get(timeout=max(0.0, deadline - time.monotonic()) + LAST_TRY_S + 0.2)
        except queue.Empty:
            break
        if cause is None:
            return
        causes[address] = cause
    listed = ", ".join(
        f"{address} ({causes.get(address, f'no answer within {timeout:g}s')})"
        for address in dict.fromkeys(_address(host, port) for host, port in servers)
    )
    raise BrokerUnavailable(
        f"Could not connect: no Kafka broker answered at {listed}.",
        hint="Check --bootstrap (or KAFEED_BOOTSTRAP) and that the cluster is up; "
        "`kafeed broker start` starts a local one.",
    )
