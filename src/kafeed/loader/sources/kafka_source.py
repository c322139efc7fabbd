"""Kafka partitions as a source (kafeed.loader.sources.source): one consumer fills their queues.

Records wait in one small queue per partition, and are handed out interleaved, one record
per partition in turn (kafeed.loader.nodes.reader). :class:`KafkaSource` is made of three parts,
each owning its state, built on the consumer when the source opens:

- which partitions the reader owns and where each starts (kafeed.loader.sources.kafka_partitions);
- the fetcher, which fills their queues from ``consume()`` (kafeed.loader.sources.kafka_fetch);
- flow control, which pauses and resumes them (kafeed.loader.sources.kafka_flow) under the
  read-ahead policy (kafeed.loader.sources.read_ahead), applied every ``CHECK_S`` while records are
  taken.

With ``archive=``, a partition whose position lies below its log start offset is read from
the topic's Iceberg table up to the log start first (kafeed.loader.sources.cold_tier); the order,
and so the state, is the same.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafeed.kafka import KafkaClients, close_consumer
from kafeed.loader.nodes.decode import RecordDecoder
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.cold_tier import ColdTier
from kafeed.loader.sources.kafka_fetch import KafkaFetcher
from kafeed.loader.sources.kafka_flow import KafkaFlow
from kafeed.loader.sources.kafka_partitions import KafkaPartitions
from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.read_ahead import BOUNDED_FETCH_WAIT_MS, CHECK_S, ReadAhead
from kafeed.loader.sources.source import Shards
from kafeed.loader.workers.parent import ParentWatch

__all__ = ["BOUNDED_FETCH_WAIT_MS", "KafkaSource"]

log = logging.getLogger("kafeed")


class _Open:
    """What an open source is made of, on its consumer."""

    def __init__(self, consumer: Any, partitions: KafkaPartitions, fetcher: KafkaFetcher,
                 flow: KafkaFlow) -> None:
        self.consumer = consumer
        self.partitions = partitions
        self.fetcher = fetcher
        self.flow = flow


class KafkaSource:
    """The topics of ``settings`` for reader ``index`` of ``count``. Its clients come from
    ``clients`` (default: ``KafkaClients(settings.connection)``; a
    :class:`kafeed.kafka.FakeKafka` in unit tests)."""

    interleaved = True
    check_s = CHECK_S

    def __init__(
        self, settings: LoaderSettings, *, index: int, count: int, client_stats: bool = False,
        parent: ParentWatch | None = None, clients: KafkaClients | None = None,
    ) -> None:
        self.settings = settings
        self._clients = clients or KafkaClients(settings.connection)
        self.index = index
        self.count = count
        self._decoder = RecordDecoder(settings, self._clients)
        self._last_error_log = 0.0
        self._client_stats = client_stats  # librdkafka statistics -> metrics (main process only)
        self._parent = parent  # in a DataLoader worker: end when the trainer is gone
        self._stop: threading.Event | None = None  # on a prefetch thread: end when it is set
        self.read_ahead = ReadAhead(settings.read_ahead_bytes)
        self.taken = self.read_ahead.taken  # once per record: no call of ours in between
        self._cold_tier = ColdTier(settings, self._decoder)
        self._open: _Open | None = None

    @property
    def assigned(self) -> bool:
        if self._open is None:
            return self.settings.mode != "group"
        return self._open.partitions.assigned

    @property
    def opened(self) -> bool:
        return self._open is not None

    @property
    def fetcher(self) -> KafkaFetcher:
        """The open source's fetcher."""
        return self._parts().fetcher

    def _parts(self) -> _Open:
        if self._open is None:
            raise RuntimeError(f"kafeed loader: reader {self.index}'s Kafka source is not open")
        return self._open

    def consumer_config(self) -> dict[str, Any]:
        """The consumer's whole librdkafka config (kafeed.kafka.KafkaClients adds the connection's)."""
        return self._clients.config(self._consumer_extra(), stage=self._stage)

    @property
    def _stage(self) -> str | None:
        return "loader" if self._client_stats else None  # librdkafka statistics -> metrics

    def _consumer_extra(self) -> dict[str, Any]:
        s = self.settings
        return {
            "group.id": s.group or "kafeed-loader",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "latest" if s.start == "latest" else "earliest",
            # A position that retention overtook goes back to the archive table, not on.
            **({"auto.offset.reset": "error"} if self._cold_tier.tables else {}),
            "isolation.level": "read_committed",
            # Fetch sizes from read_ahead_bytes: what librdkafka may fetch between two
            # looks at the queues (kafeed.loader.sources.read_ahead).
            **self.read_ahead.budget.client_config(),
            # A bounded run knows where it ends, so nothing is worth a long poll; a fetch kept
            # waiting at the end of a log (500 ms by default) holds back the fetch of a partition
            # resumed meanwhile on the same broker (kafeed.loader.sources.read_ahead).
            **({"fetch.wait.max.ms": BOUNDED_FETCH_WAIT_MS} if s.bounded else {}),
            "error_cb": self._log_error,
            **s.consumer_config,
        }

    def open(self, shards: Shards) -> None:
        s = self.settings
        consumer = self._clients.consumer(self._consumer_extra(), stage=self._stage)
        partitions = KafkaPartitions(s, consumer, shards, index=self.index, count=self.count,
                                     decoder=self._decoder, cold_tier=self._cold_tier,
                                     ahead=self.read_ahead)
        flow = KafkaFlow(consumer, shards.parts, self.read_ahead, s.queue_records)
        fetcher = KafkaFetcher(s, consumer, shards, index=self.index, partitions=partitions, flow=flow,
                               ahead=self.read_ahead, cold_tier=self._cold_tier, parent=self._parent,
                               log_error=self._log_error)
        fetcher.stop = self._stop
        self._open = _Open(consumer, partitions, fetcher, flow)
        partitions.open()
        if s.mode != "group":
            fetcher.restore()

    def close(self) -> None:
        if self._open is not None:
            close_consumer(self._open.consumer, what=f"loader reader {self.index}")
            self._open = None
        self._decoder.close()

    def stop_on(self, stop: threading.Event) -> None:
        """From now on the fetch loop raises :class:`kafeed.loader.workers.prefetch.Stopped` once
        ``stop`` is set, within ``kafka_fetch.STOP_CHECK_S`` even while it waits for records on a
        live topic."""
        self._stop = stop
        if self._open is not None:
            self._open.fetcher.stop = stop

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        if turn is not None:  # a turn waits for records: the rate as of now decides the fetch
            self.read_ahead.tick(time.monotonic())
        return self._parts().fetcher.fetch(wait)

    def wake(self, part: Partition) -> None:
        self._parts().flow.wake(part)
        self.read_ahead.starved()

    def top_up(self, now: float) -> None:
        self._parts().fetcher.top_up(now)

    def check_decoded(self) -> None:
        self._decoder.check_end()

    def _log_error(self, err: Any) -> None:
        """One clear line per 30 s while the cluster misbehaves (librdkafka retries itself)."""
        now = time.monotonic()
        if now - self._last_error_log > 30:
            self._last_error_log = now
            log.warning("kafeed loader (reader %d): Kafka error (%s); retrying, records resume when "
                        "the broker is back.", self.index, err.str())
