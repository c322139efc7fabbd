"""Ingest's writer: records, dead letters and progress in one transaction.

The transactional producer is :class:`kafeed.kafka.TransactionalProducer` (idempotent,
acks=all, the BufferError retry loop, commit and abort); this adds compression from the
options, keyed records partitioned with murmur2 (the Java client's partitioner,
so a document id maps to the same partition whichever client wrote it).
Per-partition counts come from librdkafka's statistics (``msgs`` per partition:
records enqueued, counted once, retries excluded) rather than from a delivery
report per record, which cost ~1.4 µs per record here; delivery reports are
only requested for errors. The same statistics feed kafeed's librdkafka metrics
(:mod:`kafeed.telemetry.stats`); commits, aborts and delivery errors count under
``stage="ingest"``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.progress import PROGRESS_TOPIC
from kafeed.kafka import TransactionalProducer, error_text, undelivered_error
from kafeed.telemetry.stats import StatsCallback

log = logging.getLogger("kafeed")

MESSAGE_TIMEOUT_MS = 55_000
UNDELIVERED_HINT = ("A broker that is down or cannot write (a full or read-only log dir stops it) shows in "
                    "`kafeed broker status` and `kafeed monitor`. Nothing of the aborted transaction is in "
                    "the topic; once the cluster takes writes again, the same command resumes after the "
                    "last commit.")


class TxnWriter:
    """One transactional producer; :meth:`commit` closes a transaction with its progress marker."""

    def __init__(self, settings: ConnectionSettings, *, transactional_id: str, topic: str, dlq_topic: str,
                 options: IngestOptions, max_message_bytes: int) -> None:
        self.topic = topic
        self.dlq_topic = dlq_topic
        self._stats_lock = threading.Lock()
        self._txbytes: dict[str, int] = {}
        self._msgs: dict[int, int] = {}
        self._seen_up: set[str] = set()  # brokers ever connected, e.g. "node 2 (host:port)"
        self._lost: list[str] = []  # of those, the ones the last statistics did not see up
        self._stats_seen = 0
        self._metrics_stats = StatsCallback("ingest")
        self._txn = TransactionalProducer(settings, transactional_id=transactional_id, stage="ingest",
                                          config={
            "compression.type": options.compression,
            "linger.ms": options.linger_ms,
            "batch.size": min(options.batch_bytes, max_message_bytes),
            "batch.num.messages": options.batch_messages,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.max.bytes": max(max_message_bytes + 1024, 1_000_000),
            "partitioner": "murmur2_random",
            "transaction.timeout.ms": 60_000,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "statistics.interval.ms": 500,
            "stats_cb": self._on_stats,
        })

    # -- callbacks (run inside poll/flush on this thread) --
    def _on_stats(self, raw: str) -> None:
        # Broker-level txbytes are cumulative wire bytes, after compression; partition-level
        # txbytes count messages before compression, so they cannot tell what zstd saved.
        stats = json.loads(raw)
        self._metrics_stats(stats)  # the same document feeds the Prometheus client metrics
        with self._stats_lock:
            up = set()
            for name, broker in stats.get("brokers", {}).items():
                self._txbytes[name] = int(broker.get("txbytes", 0))
                # Bootstrap and coordinator entries have no node id (-1): not brokers of their own.
                if int(broker.get("nodeid", -1)) >= 0 and broker.get("state") == "UP":
                    label = f"node {broker['nodeid']} ({broker.get('nodename', name)})"
                    self._seen_up.add(label)
                    up.add(label)
            # A broker once up and now not: reconnecting, or gone from the statistics (librdkafka
            # forgets learned brokers and bootstraps again once none answers).
            self._lost = sorted(self._seen_up - up)
            # Partition -1 is the "unassigned" queue: its records are counted again
            # when they move to their partition, so it is left out.
            parts = stats.get("topics", {}).get(self.topic, {}).get("partitions", {})
            for p, info in parts.items():
                if int(p) >= 0:
                    self._msgs[int(p)] = int(info.get("msgs", 0))
            self._stats_seen += 1

    # -- transactions --
    def init(self, timeout: float = 30.0) -> None:
        """Register the transactional id; aborts whatever a killed predecessor left open."""
        self._txn.init(timeout)

    def begin(self) -> None:
        self._txn.begin()

    def produce_all(self, records: list[tuple[bytes, bytes]],
                    headers: list[tuple[str, bytes]] | None = None) -> None:
        """Produce ``(key, value)`` pairs to the topic: one tight loop, no frame per record."""
        self._txn.produce_pairs(self.topic, records, headers)

    def dead_letter(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self._txn.produce(self.dlq_topic, value, key, headers=headers)

    def poll(self) -> None:
        self._txn.poll(0)

    def commit(self, job: str, marker: dict[str, Any]) -> None:
        """Produce the marker, flush, commit (or abort and raise)."""
        self._txn.produce(PROGRESS_TOPIC, json.dumps(marker).encode(), job.encode(), partition=0)
        try:
            left = self._txn.flush(60)
            if left or self._txn.delivery_errors:
                with self._stats_lock:
                    lost = list(self._lost)
                raise undelivered_error(self._txn.delivery_errors, left, timeout_s=MESSAGE_TIMEOUT_MS / 1000,
                                        unreachable=lost, hint=UNDELIVERED_HINT)
            self._txn.commit()
        except Exception:
            self.abort()
            raise

    def abort(self) -> None:
        try:
            self._txn.abort()
        except Exception as exc:  # the run is failing already; keep the first error
            log.warning("aborting the ingest transaction failed (%s); the cluster aborts it after "
                        "transaction.timeout.ms", error_text(exc))

    def final_stats(self, produced: int, wait_s: float = 5.0) -> tuple[dict[int, int], int | None]:
        """Per-partition record counts and wire bytes, from a statistics tick taken after the
        last commit: waits for a fresh tick whose partition counts add up to ``produced``."""
        with self._stats_lock:
            seen = self._stats_seen
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self._txn.poll(0.05)
            with self._stats_lock:
                if self._stats_seen > seen and sum(self._msgs.values()) == produced:
                    break
        with self._stats_lock:
            counts = {p: n for p, n in sorted(self._msgs.items()) if n}
            if sum(counts.values()) != produced:
                log.warning("partition counts from statistics (%d) differ from records produced (%d)",
                            sum(counts.values()), produced)
            return counts, (sum(self._txbytes.values()) if self._stats_seen else None)

    def close(self) -> None:
        self.abort()
        self._txn.flush(5)
