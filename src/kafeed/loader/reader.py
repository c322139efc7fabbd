"""One reader: a Kafka consumer over its partitions, taken in a deterministic order.

Records wait in one small queue per partition (kafeed.loader.kafka_fetch fills them) and
are handed out round-robin over the partitions (sorted), one record per turn. In bounded
mode the reader waits for a partition that is behind, so the order depends only on the
data; in unbounded mode a partition that is caught up is skipped for that turn. How much is
read ahead, and which partitions fetch meanwhile, is the read-ahead policy's
(kafeed.loader.read_ahead), applied every ``CHECK_S`` while records are taken.

The reader tracks, per partition, what is in flight (taken but not yet delivered) and
what was delivered out of order, which is what the state needs (kafeed.loader.reader_state).
In-flight records' Kafka timestamps are kept for the latency metric (not state).

Which partitions it reads and where each starts is kafeed.loader.kafka_partitions'. With
``archive=``, a partition whose position lies below its log start offset is read from the
topic's Iceberg table up to the log start first (kafeed.loader.cold_tier); the order, and
so the state, is the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kafeed.kafka import KafkaClients, close_consumer
from kafeed.loader.assignment import assign, partition_key, warn_if_idle
from kafeed.loader.cold_tier import ColdTier
from kafeed.loader.decode import RecordDecoder
from kafeed.loader.kafka_fetch import KafkaFetch
from kafeed.loader.kafka_partitions import KafkaPartitions
from kafeed.loader.offsets import list_partitions
from kafeed.loader.parent import ParentWatch
from kafeed.loader.partition import Entry, Partition
from kafeed.loader.read_ahead import BOUNDED_FETCH_WAIT_MS, ReadAhead
from kafeed.loader.reader_state import ReaderState
from kafeed.loader.readers import Item, Ref
from kafeed.loader.resume import PartitionStart
from kafeed.loader.settings import LoaderSettings

__all__ = ["BOUNDED_FETCH_WAIT_MS", "KafkaReader"]


class KafkaReader(KafkaPartitions, KafkaFetch, ReaderState):
    """Reader ``index`` of ``count``. Resume it with :meth:`load_state_dict` (exact) or
    :meth:`load_plan` (elastic) before :meth:`open`.

    Its state (:meth:`state_dict`): ``{"version": 1, "partitions": {"topic:partition":
    {"next", "read", "end", "delivered"}}, "rr": round-robin cursor, "stats": counts}``.
    Its clients come from ``clients`` (default: ``KafkaClients(settings.connection)``; a
    :class:`kafeed.kafka.FakeKafka` in unit tests).
    """

    def __init__(
        self, settings: LoaderSettings, *, index: int, count: int, client_stats: bool = False,
        parent: ParentWatch | None = None, clients: KafkaClients | None = None,
    ) -> None:
        self.settings = settings
        self._clients = clients or KafkaClients(settings.connection)
        self.index = index
        self.count = count
        self._starts: dict[str, PartitionStart] = {}
        self.known: dict[str, int] = {}  # per topic, the highest partition the loaded state names
        self.parts: list[Partition] = []
        self._by_tp: dict[tuple[str, int], Partition] = {}
        self._by_key: dict[str, Partition] = {}
        self.rr = 0
        self._restored: dict[Ref, Any] = {}
        self.stats = {"records": 0, "bad": 0, "tokens": 0}
        self._consumer: Any = None
        self._decoder = RecordDecoder(settings, self.stats, self._clients)
        self._assigned_once = settings.mode != "group"
        self._last_error_log = 0.0
        self._client_stats = client_stats  # librdkafka statistics -> metrics (main process only)
        self._parent = parent  # in a DataLoader worker: end when the trainer is gone
        self._stop: threading.Event | None = None  # on a prefetch thread: end when it is set
        self.read_ahead = ReadAhead(settings.read_ahead_bytes)
        self._check_at = 0.0
        self._cold_tier = ColdTier(settings, self._decoder)
        self._log_starts: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------------------
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

    def open(self) -> None:
        self._consumer = self._clients.consumer(self._consumer_extra(), stage=self._stage)
        if self.settings.mode == "group":
            if self._starts:  # assignments come later, in a callback: check every saved partition now
                self._check_starts(list_partitions(self._consumer, self.settings), set(self._starts))
            self._consumer.subscribe(
                list(self.settings.topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
                on_lost=self._on_revoke)
            return
        every = list_partitions(self._consumer, self.settings)
        if self._cold_tier.sources:
            self._cold_tier.open(self._consumer)
        if self.settings.mode == "replicated":
            owned = every
        else:
            warn_if_idle(len(every), self.count)
            owned = assign(every, self.index, self.count)
        self._check_starts(every, {partition_key(t, p) for t, p in owned})
        for topic, p in owned:
            self._add_partition(topic, p)
        self._assign_all()
        self._restore()

    def close(self) -> None:
        if self._consumer is not None:
            close_consumer(self._consumer, what=f"loader reader {self.index}")
            self._consumer = None
        self._decoder.close()

    @property
    def consumer(self) -> Any:
        return self._consumer

    def stop_on(self, stop: threading.Event) -> None:
        """From now on the fetch loop raises :class:`kafeed.loader.prefetch.Stopped` once
        ``stop`` is set, within ``kafka_fetch.STOP_CHECK_S`` even while it waits for records on a
        live topic (set by another thread: the loader closing its prefetch thread)."""
        self._stop = stop


    # -- taking records --------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        if not self._assigned_once:
            return False
        if self.settings.bounded:
            return all(p.fetch_done and not p.queue for p in self.parts)
        # Unbounded, a reader that a static assignment gave no partition has nothing to wait
        # for: it ends, as warn_if_idle says, and DataLoader goes on with the other workers
        # (it would wait for this worker's batch, its turn in order, for ever). In a group a
        # rebalance may still give it partitions.
        return not self.parts and self.settings.mode != "group"

    def check_decoded(self) -> None:
        """At the end of a bounded run: raise SchemaError for a topic none of whose records
        decoded (kafeed.loader.decode explains when a topic is judged)."""
        self._decoder.check_end()

    def take(self, wait: float | None = None) -> Item | None:
        """The next record in order; ``None`` when exhausted or (unbounded) nothing came
        within ``wait`` seconds (default ``poll_timeout_s``)."""
        # Fast path (the common case): the partition whose turn it is has a record queued.
        parts = self.parts
        n = len(parts)
        if n:
            rr = self.rr if self.rr < n else 0
            part = parts[rr]
            queue = part.queue
            if queue:
                entry = queue.popleft()
                self.read_ahead.taken(entry[3])
                self.rr = rr + 1 if rr + 1 < n else 0
                # Accepted before the look at the queues: a record out of its queue but not yet
                # counted read would be fetched again by a resume's seek (_nudge).
                item = self._accept(part, entry)
                if time.monotonic() >= self._check_at:
                    self._top_up()
                if item is not None:
                    return item
        return self._take_slow(self.settings.poll_timeout_s if wait is None else wait)

    def _take_slow(self, wait: float) -> Item | None:
        idle = 0
        ahead = self.read_ahead
        while True:
            parts = self.parts
            if not parts:
                if self.exhausted:
                    return None
                if not self._fetch(wait) and not self.settings.bounded:
                    return None
                continue
            n = len(parts)
            if self.rr >= n:
                self.rr = 0
            part = parts[self.rr]
            if part.queue:
                entry = part.queue.popleft()
                ahead.taken(entry[3])
                self.rr = (self.rr + 1) % n
                item = self._accept(part, entry)  # before the look at the queues, as in take()
                if time.monotonic() >= self._check_at:
                    self._top_up()
                if item is not None:
                    return item
                continue
            if part.fetch_done:
                if self.exhausted:
                    # Where the cursor stops depends on which end-of-partition event came
                    # first; at the end it means nothing, so keep it canonical and two runs
                    # that delivered the same records save the same state.
                    self.rr = 0
                    return None
                self.rr = (self.rr + 1) % n
                continue
            if part.paused:  # emptied while paused: its turn needs it
                self._wake(part)
                ahead.starved()
            if not self.settings.bounded and part.eof:
                self.rr = (self.rr + 1) % n
                idle += 1
                if idle >= n:
                    if not self._fetch(wait):
                        return None
                    idle = 0
                continue
            ahead.tick(time.monotonic())
            self._fetch(wait)

    def _accept(self, part: Partition, entry: Entry) -> Item | None:
        offset = entry[0]
        if offset < part.read:
            return None
        part.read = offset + 1
        if offset in part.delivered:
            return None
        payload = part.decode(entry)  # by the tier its queue holds: Kafka or the archive table
        if payload is None:
            part.delivered.add(offset)
            return None
        part.in_flight.add(offset)
        part.stamps[offset] = entry[2]
        self.stats["records"] += 1
        return (part.key, offset), payload, part.partial.pop(offset, 0) if part.partial else 0

    def delivered(self, ref: Ref, *, handed_out: bool = True) -> None:
        """Mark a taken record as delivered (its last token/sample left in a batch, unless
        ``handed_out=False``: nothing of it was left to hand out after a resume)."""
        part = self._by_key.get(ref[0])
        if part is None:  # revoked in group mode
            return
        part.in_flight.discard(ref[1])
        part.delivered.add(ref[1])
        stamp = part.stamps.pop(ref[1], None)
        if handed_out and stamp is not None:
            part.done.append(stamp)
        if len(part.delivered) > 4096 + 4 * len(part.in_flight):
            part.prune()

    def delivered_many(self, refs: list[Ref]) -> None:
        for ref in refs:
            self.delivered(ref)

    def drain_delivered(self) -> tuple[dict[str, int], list[int]]:
        """Records delivered since the last drain: count per topic, Kafka timestamps (ms)."""
        per_topic: dict[str, int] = {}
        stamps: list[int] = []
        for part in self.parts:
            if part.done:
                per_topic[part.topic] = per_topic.get(part.topic, 0) + len(part.done)
                stamps.extend(part.done)
                part.done = []
        return per_topic, stamps


    # -- state: kafeed.loader.reader_state ----------------------------------------------
    def _opened(self) -> bool:
        return self._consumer is not None
