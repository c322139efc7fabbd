"""The one place librdkafka client configs are built (clients: :class:`kafeed.kafka.KafkaClients`).

Connection and security come from :meth:`kafeed.config.ConnectionSettings.client_config`
(which also routes librdkafka's log lines to the ``kafeed.librdkafka`` logger);
a ``stage`` adds the statistics callback that feeds that stage's client metrics
(:mod:`kafeed.telemetry.stats`); ``extra`` is the caller's role-specific part.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.telemetry.stats import client_stats_config

log = logging.getLogger("kafeed")

CLOSE_TIMEOUT_S = 60.0  # past librdkafka's default session timeout (45 s), which frees the partitions

# The last authentication or TLS failure librdkafka reported per bootstrap: a failed
# request only says "transport failure"; this says why (wrong password, unknown CA).
_SECURITY_FAILURES: dict[str, str] = {}
_LOCK = threading.Lock()
_SECURITY_CODES = {"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED"}
_WHERE = re.compile(r"^\S+://\S+?: ")  # "sasl_ssl://127.0.0.1:9092/bootstrap: "
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)$")


def _note_security_errors(bootstrap: str) -> Callable[[Any], None]:
    def note(err: Any) -> None:
        text = str(err.str())
        if err.name() in _SECURITY_CODES or "SSL routines" in text:
            with _LOCK:
                _SECURITY_FAILURES[bootstrap] = _AFTER.sub("", _WHERE.sub("", text))
    return note


def security_failure(client: Any, connection: ConnectionSettings) -> str | None:
    """Why ``client`` (built here) could not authenticate, if it was that; forgets it once told.

    Serves the client's pending callbacks first: librdkafka reports these errors there.
    The text names the mechanism or the certificate check, never a credential.
    """
    try:
        client.poll(0)
    except Exception:  # a closed client has nothing more to report
        pass
    with _LOCK:
        return _SECURITY_FAILURES.pop(connection.bootstrap, None)


def client_config(connection: ConnectionSettings, extra: Mapping[str, Any] | None = None, *,
                  stage: str | None = None) -> dict[str, Any]:
    """Connection, logger, statistics (when ``stage`` is given) and ``extra``, in that order.

    Authentication and TLS failures are remembered for :func:`security_failure` unless
    ``extra`` brings its own ``error_cb``.
    """
    conf = connection.client_config()
    conf["error_cb"] = _note_security_errors(connection.bootstrap)
    # With every known broker down at once (a one-node cluster restarted), librdkafka 2.16
    # bootstraps again by default and drops its broker handles, but consumers' fetches, share
    # consumers and the group coordinator can stay on a dropped handle and never read or commit
    # again (librdkafka issues 5456, 5511; docs/faults.md). Without that, the client reconnects
    # to the brokers it knows once they are back.
    conf["metadata.recovery.strategy"] = "none"
    if stage is not None:
        conf |= client_stats_config(stage)
    if extra:
        conf |= dict(extra)
    return conf


def close_consumer(consumer: Any, timeout_s: float = CLOSE_TIMEOUT_S, *, what: str = "consumer",
                   failure_level: int = logging.DEBUG) -> bool:
    """Close ``consumer`` (leave its group, run its revoke callback), giving up after ``timeout_s``.
    Every group consumer kafeed runs to the end (stream steps, loader readers, the archive
    sink) is closed here.

    librdkafka's close can wait for ever on a group that never finishes terminating
    (confluent-kafka-python issue 1667; one prepare worker of a loaded test run sat in it
    for 23 minutes with its broker up), and it has no timeout of its own. So it runs on a
    daemon thread: past the timeout the caller goes on, its group's session timeout frees
    the partitions, and a transactional producer's next instance fences what was left open.
    Returns whether the close finished; an error it raised is logged at ``failure_level``
    (debug by default: after the outcome is settled, a close error must not mask it).
    """
    failed: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close()
        except Exception as exc:
            failed.append(exc)

    closer = threading.Thread(target=close, name=f"kafeed-close-{what}", daemon=True)
    closer.start()
    closer.join(timeout_s)
    if closer.is_alive():
        log.warning("%s close did not finish within %g s; going on without it (its group's "
                    "session timeout frees its partitions)", what, timeout_s)
        return False
    if failed:
        log.log(failure_level, "%s close failed: %s", what, failed[0])
    return True
