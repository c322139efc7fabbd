"""One reader: a Kafka consumer over its partitions, taken in a deterministic order.

Records are fetched in batches (``consume(num_messages=...)``) into one small queue per
partition and handed out round-robin over the partitions (sorted), one record per turn.
In bounded mode the reader waits for a partition that is behind, so the order depends
only on the data; in unbounded mode a partition that is caught up is skipped for that
turn. A record the consumer hands out again (its fetch position went back, as a seek to
the log start does when retention overtook a partition) is dropped as it comes, so it
takes no turn.

How much is read ahead follows the consumption rate within ``read_ahead_bytes``
(kafeed.loader.read_ahead): the queues are topped up from librdkafka while they hold less
than the target, and partitions with records queued are paused once they hold the target,
so memory stays flat. A partition's queue never holds more than ``queue_records``: a
``consume()`` asks for no more records than the least room below that cap, and a partition
at the cap is paused; should a call still bring records of it beyond the cap, they are
dropped and fetched again after it resumes (:meth:`KafkaReader._refetch`).

The reader tracks, per partition, what is in flight (taken but not yet delivered) and
what was delivered out of order, which is what the state needs (see kafeed.loader.state).
In-flight records' Kafka timestamps are kept for the latency metric (not state).

With ``archive=``, a partition whose position lies below its log start offset begins
*cold*: its queue is filled from the topic's Iceberg table up to the log start
(kafeed.loader.cold_tier), then the partition is assigned at that offset. Should retention
overtake a partition being read from Kafka, the consumer reports the position out of range
(``auto.offset.reset=error``) and the partition goes back to the table from where it stood.
The order, and so the state, is the same.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafeed.kafka import KafkaClients, close_consumer, translate_kafka_error
from kafeed.loader.assignment import assign, parse_key, partition_key, warn_if_idle
from kafeed.loader.cold_tier import ColdTier
from kafeed.loader.decode import RecordDecoder
from kafeed.loader.offsets import list_partitions, resolve_end, resolve_start, watermarks
from kafeed.loader.parent import ParentWatch
from kafeed.loader.partition import Partition
from kafeed.loader.prefetch import Stopped
from kafeed.loader.read_ahead import (
    BOUNDED_FETCH_WAIT_MS,
    CHECK_S,
    REFILL_S,
    ReadAhead,
    pausing,
    pull_size,
    refill_after_wake,
    waking,
    woken_with,
)
from kafeed.loader.readers import STATE_KEYS, STATE_VERSION, Item, Ref
from kafeed.loader.resume import (
    PartitionStart,
    check_known_partitions,
    check_saved_partitions,
    done_at_open,
    exact_starts,
    plan_starts,
)
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state import check_positions, check_version, require_keys

log = logging.getLogger("kafeed")

STOP_CHECK_S = 0.1  # with a stop hook, a wait for records looks at it this often

class KafkaReader:
    """Reader ``index`` of ``count``. Resume it with :meth:`load_state_dict` (exact) or
    :meth:`load_plan` (elastic) before :meth:`open`.

    Its state (:meth:`state_dict`): ``{"version": 1, "partitions": {"topic:partition":
    {"next", "read", "end", "delivered"}}, "rr": round-robin cursor, "stats": counts}``.
    """

    def __init__(
        self, settings: LoaderSettings, *, index: int, count: int, client_stats: bool = False,
        parent: ParentWatch | None = None,
    ) -> None:
        self.settings = settings
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
        self._decoder = RecordDecoder(settings, self.stats)
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
        return KafkaClients(self.settings.connection).config(self._consumer_extra(), stage=self._stage)

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
        self._consumer = KafkaClients(self.settings.connection).consumer(
            self._consumer_extra(), stage=self._stage)
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

    def _check_starts(self, every: list[tuple[str, int]], owned: set[str]) -> None:
        """Before anything is fetched: every saved partition exists, every owned one older than
        the state is in it, and the saved positions of the ones this reader resumes lie inside
        their current logs (kafeed.loader.resume)."""
        check_saved_partitions(self._starts, every)
        check_known_partitions(self._starts, owned, self.known)
        for key in sorted(owned & set(self._starts)):
            start = self._starts[key]
            topic, partition = parse_key(key)
            low, high = watermarks(self._consumer, topic, partition, self.settings)
            self._log_starts[key] = low
            source = self._cold_tier.sources.get(topic)
            if source is not None:
                low = source.floor(key, partition, low, start.next)
            check_positions(key, start.next, start.read, low, high)

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
        ``stop`` is set, within ``STOP_CHECK_S`` even while it waits for records on a
        live topic (set by another thread: the loader closing its prefetch thread)."""
        self._stop = stop

    # -- partitions ------------------------------------------------------------------------
    def _add_partition(self, topic: str, partition: int, committed: int | None = None) -> Partition:
        key = partition_key(topic, partition)
        start = self._starts.get(key)
        if start is None:
            if committed is not None and committed >= 0:
                first = committed
            else:
                first = resolve_start(self._consumer, topic, partition, self.settings)
                source = self._cold_tier.sources.get(topic)
                if source is not None:
                    first = source.cold_start(key, partition, first, self._log_start(key))
            end = resolve_end(self._consumer, topic, partition, self.settings)
            start = PartitionStart(next=first, read=first, end=end)
        part = Partition(key=key, topic=topic, partition=partition, read=start.read, end=start.end,
                          delivered=set(start.delivered), partial=dict(start.partial),
                          restore=set(start.restore), in_flight=set(start.restore), seek=start.next,
                          decode=self._decoder.decode)
        part.fetch_done = done_at_open(start)
        if topic in self._cold_tier.sources and not part.fetch_done and part.seek < self._log_start(key):
            self._cold_tier.begin(part, self._log_start(key))
        self.parts.append(part)
        self.parts.sort(key=lambda x: (x.topic, x.partition))
        self._by_tp[(topic, partition)] = part
        self._by_key[key] = part
        return part

    def _assign_all(self) -> None:
        from kafeed.kafka.types import TopicPartition

        tps = [TopicPartition(p.topic, p.partition, p.seek) for p in self.parts
               if not p.fetch_done and p.cold_until is None]
        self._consumer.assign(tps)

    def _log_start(self, key: str) -> int:
        if key not in self._log_starts:
            self._log_starts[key] = watermarks(self._consumer, *parse_key(key), self.settings)[0]
        return self._log_starts[key]

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        committed = {}
        try:
            for tp in consumer.committed(partitions, timeout=10):
                committed[(tp.topic, tp.partition)] = tp.offset
        except Exception as exc:
            log.warning("kafeed loader: could not read committed offsets (%s); using start.", exc)
        for tp in partitions:
            part = self._by_tp.get((tp.topic, tp.partition))
            if part is None:
                part = self._add_partition(tp.topic, tp.partition, committed.get((tp.topic, tp.partition)))
            tp.offset = part.seek
        consumer.assign(partitions)
        self._assigned_once = True
        log.info("kafeed loader: group %s assigned %s", self.settings.group,
                 ", ".join(f"{tp.topic}:{tp.partition}" for tp in partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        for tp in partitions:
            part = self._by_tp.pop((tp.topic, tp.partition), None)
            if part is not None:
                self._by_key.pop(part.key, None)
                self.read_ahead.dropped(sum(len(msg) for msg in part.queue))
                self.parts.remove(part)
        self.rr = self.rr % len(self.parts) if self.parts else 0
        try:
            consumer.unassign()
        except Exception as exc:
            log.debug("kafeed loader: unassign failed: %s", exc)

    # -- fetching --------------------------------------------------------------------------
    def _fetch(self, timeout: float) -> int:
        """Records from librdkafka into the queues: one ``consume()`` waiting up to
        ``timeout``, more at once while librdkafka has them and the queues are below the
        target; then pause or resume. Returns how many records were queued or restored."""
        queued, more = self._pull(timeout)
        ahead = self.read_ahead
        while more and ahead.want_more:
            got, more = self._pull(0)
            queued += got
        self._hold()
        return queued

    def _pull(self, timeout: float) -> tuple[int, bool]:
        """One consume() call sized to the room left: (records queued or restored, whether
        it brought all it asked for, so librdkafka may hold more)."""
        from kafeed.kafka.types import KafkaError

        if self._parent is not None:
            self._parent.check()
        if self._stop is not None and self._stop.is_set():
            raise Stopped(f"reader {self.index} was stopped")
        if self.settings.bounded:
            timeout = min(timeout, 0.05)
        cold = self._cold_tier
        queued = cold.fetch(self._by_tp, self._consumer, self._keep_restored) if cold.parts else 0
        if queued:
            timeout = 0  # records are waiting: take what Kafka has, do not wait for more
        consume = self._consumer.consume
        ahead = self.read_ahead
        limit = self.settings.queue_records
        # A partition caught up at the end of its log brings none, so its room does not count
        # (should records arrive for it meanwhile, _refetch guards the cap).
        batch = pull_size(ahead, [p for p in self.parts if not p.paused and not p.fetch_done
                                  and not p.eof and p.cold_until is None],
                          self.settings.consume_batch, limit)
        if self.settings.bounded:
            # A replay: waiting a little for a full batch makes fewer, fuller calls (and
            # leaves the CPU to librdkafka's fetcher meanwhile).
            msgs = consume(num_messages=batch, timeout=timeout)
        else:
            # consume() waits for a full batch or the timeout, so a reader that may be caught
            # up takes what librdkafka has without waiting, or else waits for one record,
            # woken by its arrival, and takes what came with it: a fresh record is handed on
            # at once, never held for a batch to fill.
            msgs = consume(num_messages=batch, timeout=0)
            if not msgs and timeout > 0:
                msgs = self._wait_for_one(timeout)
                if msgs and batch > 1:
                    msgs.extend(consume(num_messages=batch - 1, timeout=0))
        by_tp = self._by_tp
        last_tp: tuple[str, int] | None = None
        part: Partition | None = None
        queue: Any = None
        floor = 0  # the least offset of the current run's partition not yet taken or queued
        finished: list[Partition] = []
        over: dict[str, tuple[Partition, int]] = {}  # at its cap: the first record dropped
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof_part = by_tp.get((msg.topic(), msg.partition()))
                    if eof_part is not None and eof_part.key not in over:
                        eof_part.eof = True
                        if eof_part.end is not None and msg.offset() >= eof_part.end:
                            eof_part.fetch_done = True
                            finished.append(eof_part)
                elif err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                    KafkaError.GROUP_AUTHORIZATION_FAILED):
                    # Retrying cannot help: the cluster's ACLs refuse this principal.
                    who = self.settings.connection.sasl_username or "this client"
                    raise translate_kafka_error(err, action=f"read topic {msg.topic()!r} as {who}")
                elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                    self._out_of_range(msg.topic(), msg.partition())
                else:
                    self._log_error(err)
                continue
            tp = (msg.topic(), msg.partition())
            if tp != last_tp:  # records come in runs per partition: look up once per run
                part = by_tp.get(tp)
                last_tp = tp
                if part is not None:
                    queue = part.queue
                    floor = queue[-1].offset() + 1 if queue else part.read
            if part is None or part.cold_until is not None:
                continue
            offset = msg.offset()
            if offset < floor:
                # Taken or queued already: librdkafka hands records out again when its fetch
                # position goes back (a seek below what was fetched). A copy queued and skipped
                # at its turn would give that turn away and change the order.
                if offset in part.restore:
                    self._keep_restored(part, msg, self._decoder.decode)
                    queued += 1
                continue
            if len(queue) >= limit and not part.fetch_done:
                # Paused at its cap, but this call's records of it were fetched before the
                # pause: dropped, and read again from the first of them (_refetch).
                if part.key not in over:
                    over[part.key] = (part, offset)
                continue
            end = part.end
            if end is not None and offset >= end:
                part.fetch_done = True
                finished.append(part)
                continue
            queue.append(msg)
            floor = offset + 1
            ahead.added(len(msg))
            part.eof = False
            queued += 1
            if end is not None and offset + 1 >= end:
                part.fetch_done = True
                finished.append(part)
            if len(queue) >= limit and not part.paused:
                self._pause(part, True)
        if over:
            self._refetch(list(over.values()))
        if finished:
            # Fetched to their end: paused, since a partition at the end of its log keeps its
            # leader's fetch requests waiting (fetch.wait.max.ms, 500 ms), and a partition of
            # the same leader that is resumed meanwhile waits behind them.
            self._pause_many([p for p in {id(p): p for p in finished}.values() if not p.paused], True)
        return queued, len(msgs) >= batch

    def _refetch(self, dropped: list[tuple[Partition, int]]) -> None:
        """Partitions at their cap whose records from ``offset`` on were dropped: paused (if
        not yet) and sought back to ``offset``, where librdkafka fetches from once they are
        resumed. Pausing a partition only filters what librdkafka hands out *after* the call,
        and moves its fetch position past everything handed out before, so without the seek
        the dropped records would be skipped."""
        from kafeed.kafka.types import TopicPartition

        self._pause_many([part for part, _ in dropped if not part.paused], True)
        for part, offset in dropped:
            self._consumer.seek(TopicPartition(part.topic, part.partition, offset))

    def _wait_for_one(self, timeout: float) -> list[Any]:
        """``consume(num_messages=1, timeout)``, in slices of ``STOP_CHECK_S`` that look at the
        stop hook in between when there is one. librdkafka counts whole milliseconds and drops
        the rest, so the wait is rounded up: ended early, it would leave a caller that waits
        for a deadline (``max_wait_s``) spinning until then."""
        timeout = math.ceil(timeout * 1000) / 1000
        consume = self._consumer.consume
        if self._stop is None:
            msgs: list[Any] = consume(num_messages=1, timeout=timeout)
            return msgs
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            msgs = consume(num_messages=1, timeout=max(0.0, min(left, STOP_CHECK_S)))
            if msgs or left <= STOP_CHECK_S:
                return msgs
            if self._stop.is_set():
                raise Stopped(f"reader {self.index} was stopped")

    def _hold(self) -> None:
        """Hold the queues near the target: resume, refill and pause partitions as the
        read-ahead policy says (kafeed.loader.read_ahead explains why)."""
        ahead = self.read_ahead
        cap = self.settings.queue_records
        # A cold partition is not assigned; one fetched to its end stays paused.
        live = [p for p in self.parts if not p.fetch_done and p.cold_until is None]
        woken = waking(ahead, live, cap)
        if woken:
            self._pause_many(woken, False)
            if refill_after_wake(ahead, cap, len(live)):
                # Refill to the target at once and pause again: left running until the next
                # take (a whole training step later, maybe), the fetcher would bring in far more.
                deadline = time.monotonic() + min(REFILL_S, self.settings.poll_timeout_s)
                while ahead.want_more:
                    left = deadline - time.monotonic()
                    # Every partition paused (at its cap, below a target in bytes): nothing
                    # more can come, and a pull would wait out the deadline for it.
                    if left <= 0 or all(p.paused for p in live) or not self._pull(left)[0]:
                        break
        self._pause_many(pausing(ahead, live, cap), True)

    def _wake(self, part: Partition) -> None:
        """``part`` was found empty and paused at its turn: resume it, and the paused
        partitions whose turn comes soon too (kafeed.loader.read_ahead.woken_with)."""
        paused = [p for p in self.parts if p.paused and not p.fetch_done and p.cold_until is None]
        self._pause_many(woken_with(part, paused, len(self.parts), self.read_ahead,
                                    self.settings.queue_records), False)

    def _top_up(self) -> None:
        """Now and then while records are taken: update the rate, pause or resume, and move
        what librdkafka has fetched into the queues while they hold less than the target
        (never waiting), so its fetcher keeps going."""
        now = time.monotonic()
        self._check_at = now + CHECK_S
        ahead = self.read_ahead
        ahead.tick(now)
        if ahead.want_more:
            self._fetch(0)
        else:
            self._hold()

    def _out_of_range(self, topic: str, partition: int) -> None:
        """Retention deleted a partition's records before the consumer fetched them."""
        from kafeed.kafka.types import TopicPartition

        part = self._by_tp.get((topic, partition))
        if part is None or part.cold_until is not None:
            return
        if topic in self._cold_tier.sources:
            self._cold_tier.overtaken(part, self._consumer)
            return
        # Not archived: read on from the log start, as "earliest" always did.
        log.warning("kafeed loader: records of %s were deleted before they were read; "
                    "reading on from its log start", part.key)
        self._consumer.seek(TopicPartition(topic, partition, -2))

    def _keep_restored(self, part: Partition, msg: Any, decode: Callable[[Any], Any]) -> None:
        """An in-flight record of an exact resume, re-read from Kafka or the table."""
        offset = msg.offset()
        part.restore.discard(offset)
        self._restored[(part.key, offset)] = decode(msg)
        part.stamps[offset] = msg.timestamp()[1]

    def _pause(self, part: Partition, pause: bool) -> None:
        self._pause_many([part], pause)

    def _pause_many(self, parts: list[Partition], pause: bool) -> None:
        from kafeed.kafka.types import TopicPartition

        if not parts:
            return
        tps = [TopicPartition(part.topic, part.partition) for part in parts]
        if pause:
            self._consumer.pause(tps)
        else:
            self._consumer.resume(tps)
            self._nudge(parts)
        for part in parts:
            part.paused = pause

    def _nudge(self, resumed: list[Partition]) -> None:
        """Seek ``resumed`` partitions to where their fetching goes on (just past the last
        record fetched of each), which changes nothing but wakes librdkafka's fetcher. A
        resume alone is seen only when that thread next wakes on its own, up to a second
        later; with every partition of a consumer paused, each resume cost 0.2-0.5 s
        (benchmarks/bench_mixture.py: a third of the mixture's time). A partition still
        re-reading in-flight records of a resume is left alone: it fetches from below."""
        from kafeed.kafka.types import TopicPartition

        for part in resumed:
            if not part.restore:
                queue = part.queue
                self._consumer.seek(TopicPartition(part.topic, part.partition,
                                                   queue[-1].offset() + 1 if queue else part.read))

    def _log_error(self, err: Any) -> None:
        """One clear line per 30 s while the cluster misbehaves (librdkafka retries itself)."""
        now = time.monotonic()
        if now - self._last_error_log > 30:
            self._last_error_log = now
            log.warning("kafeed loader (reader %d): Kafka error (%s); retrying, records resume when "
                        "the broker is back.", self.index, err.str())

    def _restore(self) -> None:
        """Re-read the in-flight records of an exact resume (shuffle buffer, packer carry)."""
        counted = dict(self.stats)  # the saved counts include these records: not twice
        waiting = [p for p in self.parts if p.restore]
        while any(p.restore for p in waiting):
            self._fetch(self.settings.poll_timeout_s)
            for p in waiting:
                if p.restore and (p.fetch_done or p.queue):
                    lost = sorted(p.restore)
                    p.in_flight -= p.restore
                    log.warning("kafeed loader: %d in-flight record(s) of %s are gone (retention?): %s",
                                len(lost), p.key, lost[:5])
                    p.restore.clear()
        self.stats.update(counted)

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
                msg = queue.popleft()
                self.read_ahead.taken(len(msg))
                self.rr = rr + 1 if rr + 1 < n else 0
                # Accepted before the look at the queues: a record out of its queue but not yet
                # counted read would be fetched again by a resume's seek (_nudge).
                item = self._accept(part, msg)
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
                msg = part.queue.popleft()
                ahead.taken(len(msg))
                self.rr = (self.rr + 1) % n
                item = self._accept(part, msg)  # before the look at the queues, as in take()
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

    def _accept(self, part: Partition, msg: Any) -> Item | None:
        offset = msg.offset()
        if offset < part.read:
            return None
        part.read = offset + 1
        if offset in part.delivered:
            return None
        payload = part.decode(msg)  # by the tier its queue holds: Kafka or the archive table
        if payload is None:
            part.delivered.add(offset)
            return None
        part.in_flight.add(offset)
        part.stamps[offset] = msg.timestamp()[1]
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

    def restored(self) -> dict[Ref, Any]:
        """The in-flight records of an exact resume, re-read by :meth:`open` (decoded; ``None``
        for a record that no longer decodes). Records that are gone are missing."""
        restored, self._restored = self._restored, {}
        return restored

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Positions per partition, the round-robin cursor and the counts (JSON data)."""
        return {"version": STATE_VERSION, "partitions": {p.key: p.entry() for p in self.parts},
                "rr": self.rr, "stats": dict(self.stats)}

    def load_state_dict(self, state: Mapping[str, Any], *, in_flight: Iterable[Ref] = ()) -> None:
        """Resume exactly where ``state`` was taken (call before :meth:`open`). ``in_flight``:
        the records taken but not yet delivered (whoever holds them names them), re-read
        by offset when the reader opens."""
        if self._consumer is not None:
            raise RuntimeError("load_state_dict() must come before open()")
        require_keys(state, STATE_KEYS, "reader state")
        check_version(state["version"], STATE_VERSION, "Reader state")
        self._starts = exact_starts(state["partitions"], in_flight)
        self.rr = int(state["rr"])
        self.stats.update(state["stats"])  # in place: the decoder counts into the same dict

    def load_plan(self, plan: Mapping[str, Mapping[str, Any]]) -> None:
        """Resume elastically from per-partition positions (kafeed.loader.state.partition_plan)."""
        if self._consumer is not None:
            raise RuntimeError("load_plan() must come before open()")
        self._starts = plan_starts(plan)
