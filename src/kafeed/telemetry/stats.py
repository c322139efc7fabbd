"""librdkafka's statistics JSON (``statistics.interval.ms`` + ``stats_cb``) into kafeed metrics.

librdkafka reports running totals; Prometheus counters only go up by deltas,
so :class:`StatsCallback` remembers the last totals per client instance and
adds the difference (a smaller total means a new client instance: count from zero).
Round-trip times arrive in microseconds and leave in seconds.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter

from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")

_TOTALS: tuple[tuple[str, Counter], ...] = (
    ("tx_bytes", m.CLIENT_TX_BYTES),
    ("rx_bytes", m.CLIENT_RX_BYTES),
    ("txmsgs", m.CLIENT_TX_MESSAGES),
    ("rxmsgs", m.CLIENT_RX_MESSAGES),
)
_BROKER_TOTALS: tuple[tuple[str, Counter], ...] = (
    ("txerrs", m.CLIENT_TX_ERRORS),
    ("txretries", m.CLIENT_TX_RETRIES),
)
_RTT_QUANTILES = (("p50", "0.5"), ("p95", "0.95"), ("p99", "0.99"))


class StatsCallback:
    """A ``stats_cb`` for a librdkafka client of pipeline stage ``stage``.

    Call it with the JSON string librdkafka passes (or an already parsed dict).
    Malformed statistics are logged and skipped: metrics must never break a stage.
    """

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._last: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def __call__(self, stats: str | dict[str, Any]) -> None:
        try:
            doc = json.loads(stats) if isinstance(stats, str) else stats
            with self._lock:
                self._apply(doc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("ignoring malformed librdkafka statistics: %s", exc)

    def _add(self, counter: Counter, client: str, key: str, total: float) -> None:
        last = self._last.get((client, key), 0.0)
        delta = total - last if total >= last else total
        self._last[(client, key)] = total
        if delta > 0:
            counter.labels(stage=self.stage, client=client).inc(delta)

    def _apply(self, doc: dict[str, Any]) -> None:
        client = str(doc.get("name") or doc.get("client_id") or "unknown")
        for key, counter in _TOTALS:
            if key in doc:
                self._add(counter, client, key, float(doc[key]))
        m.CLIENT_QUEUE_MESSAGES.labels(stage=self.stage, client=client).set(float(doc.get("msg_cnt", 0)))
        brokers: dict[str, Any] = doc.get("brokers", {})
        for key, counter in _BROKER_TOTALS:
            total = sum(float(b.get(key, 0)) for b in brokers.values())
            self._add(counter, client, key, total)
        for name, broker in brokers.items():
            # Logical brokers (GroupCoordinator, TxnCoordinator) have nodeid -1 and
            # duplicate a real one's connection: report real brokers only.
            if int(broker.get("nodeid", -1)) < 0:
                continue
            rtt = broker.get("rtt") or {}
            if not rtt.get("cnt"):
                continue  # no request in this interval: keep the last figure
            label = f"{broker.get('nodeid')}:{name.rsplit('/', 1)[0]}"
            for key, quantile in _RTT_QUANTILES:
                m.BROKER_RTT.labels(stage=self.stage, broker=label, quantile=quantile).set(
                    float(rtt[key]) / 1e6)
        if doc.get("type") == "consumer":
            for topic, tdoc in doc.get("topics", {}).items():
                for part, pdoc in tdoc.get("partitions", {}).items():
                    lag = int(pdoc.get("consumer_lag", -1))
                    if int(part) < 0 or lag < 0:
                        continue  # internal UA partition, or lag not known yet
                    m.CLIENT_CONSUMER_LAG.labels(stage=self.stage, topic=topic, partition=part).set(lag)


def librdkafka_stats_callback(stage: str) -> Callable[[str], None]:
    """A ``stats_cb`` that feeds librdkafka's statistics into the kafeed metrics of ``stage``.

    Use it with ``statistics.interval.ms`` in the client config, e.g.
    ``{"statistics.interval.ms": 5000, "stats_cb": librdkafka_stats_callback("prepare")}``.
    """
    return StatsCallback(stage)


#: How often kafeed's own clients report statistics: often enough for a 15 s scrape,
#: rare enough that parsing the JSON costs nothing measurable.
STATS_INTERVAL_MS = 5000


def client_stats_config(stage: str, interval_ms: int = STATS_INTERVAL_MS) -> dict[str, Any]:
    """The librdkafka config entries that feed a client's statistics into ``stage``'s metrics."""
    return {"statistics.interval.ms": interval_ms, "stats_cb": StatsCallback(stage)}
