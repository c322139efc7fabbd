"""Kafka partitions as a source (kafeed.loader.source): one consumer fills their queues.

Records wait in one small queue per partition (kafeed.loader.kafka_fetch fills them), and
are handed out interleaved, one record per partition in turn (kafeed.loader.reader). How
much is read ahead, and which partitions fetch meanwhile, is the read-ahead policy's
(kafeed.loader.read_ahead), applied every ``CHECK_S`` while records are taken.

Which partitions a reader owns and where each starts is kafeed.loader.kafka_partitions'.
With ``archive=``, a partition whose position lies below its log start offset is read from
the topic's Iceberg table up to the log start first (kafeed.loader.cold_tier); the order,
and so the state, is the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kafeed.kafka import KafkaClients, close_consumer
from kafeed.loader.assignment import owned, partition_key
from kafeed.loader.cold_tier import ColdTier
from kafeed.loader.decode import RecordDecoder
from kafeed.loader.kafka_fetch import KafkaFetch
from kafeed.loader.kafka_partitions import KafkaPartitions
from kafeed.loader.offsets import list_partitions
from kafeed.loader.parent import ParentWatch
from kafeed.loader.partition import Partition
from kafeed.loader.read_ahead import BOUNDED_FETCH_WAIT_MS, CHECK_S, ReadAhead
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.source import Shards

__all__ = ["BOUNDED_FETCH_WAIT_MS", "KafkaSource"]


class KafkaSource(KafkaPartitions, KafkaFetch):
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
        self.parts: list[Partition] = []  # the reader's, once open() is given them
        self._by_tp: dict[tuple[str, int], Partition] = {}
        self._consumer: Any = None
        self._decoder = RecordDecoder(settings, self._clients)
        self._assigned_once = settings.mode != "group"
        self._last_error_log = 0.0
        self._client_stats = client_stats  # librdkafka statistics -> metrics (main process only)
        self._parent = parent  # in a DataLoader worker: end when the trainer is gone
        self._stop: threading.Event | None = None  # on a prefetch thread: end when it is set
        self.read_ahead = ReadAhead(settings.read_ahead_bytes)
        self.taken = self.read_ahead.taken  # once per record: no call of ours in between
        self._cold_tier = ColdTier(settings, self._decoder)
        self._log_starts: dict[str, int] = {}

    @property
    def assigned(self) -> bool:
        return self._assigned_once

    @property
    def opened(self) -> bool:
        return self._consumer is not None

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
            **({"auto.offset.reset": "error"} if self._cold_tier.sources else {}),
            "isolation.level": "read_committed",
            # Fetch sizes from read_ahead_bytes: what librdkafka may fetch between two
            # looks at the queues (kafeed.loader.read_ahead).
            **self.read_ahead.budget.client_config(),
            # A bounded run knows where it ends, so nothing is worth a long poll; a fetch kept
            # waiting at the end of a log (500 ms by default) holds back the fetch of a partition
            # resumed meanwhile on the same broker (kafeed.loader.read_ahead).
            **({"fetch.wait.max.ms": BOUNDED_FETCH_WAIT_MS} if s.bounded else {}),
            "error_cb": self._log_error,
            **s.consumer_config,
        }

    def open(self, shards: Shards) -> None:
        self._shards = shards
        self.parts = shards.parts  # the same list: the reader's order, which this source fills
        self._consumer = self._clients.consumer(self._consumer_extra(), stage=self._stage)
        if self.settings.mode == "group":
            if shards.starts:  # assignments come later, in a callback: check every saved partition now
                self._check_starts(list_partitions(self._consumer, self.settings), set(shards.starts))
            self._consumer.subscribe(
                list(self.settings.topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
                on_lost=self._on_revoke)
            return
        every = list_partitions(self._consumer, self.settings)
        if self._cold_tier.sources:
            self._cold_tier.open(self._consumer)
        mine = owned(every, self.settings.mode, self.index, self.count)
        self._check_starts(every, {partition_key(t, p) for t, p in mine})
        for topic, p in mine:
            self._add_partition(topic, p)
        self._assign_all()
        self._restore()

    def close(self) -> None:
        if self._consumer is not None:
            close_consumer(self._consumer, what=f"loader reader {self.index}")
            self._consumer = None
        self._decoder.close()

    def stop_on(self, stop: threading.Event) -> None:
        """From now on the fetch loop raises :class:`kafeed.loader.prefetch.Stopped` once
        ``stop`` is set, within ``kafka_fetch.STOP_CHECK_S`` even while it waits for records on a
        live topic."""
        self._stop = stop

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        if turn is not None:  # a turn waits for records: the rate as of now decides the fetch
            self.read_ahead.tick(time.monotonic())
        return self._fetch(wait, turn)

    def wake(self, part: Partition) -> None:
        self._wake(part)
        self.read_ahead.starved()

    def check_decoded(self) -> None:
        self._decoder.check_end()
