"""How a Kafka reader fetches: librdkafka's records into its partition queues, paused and
resumed as the read-ahead policy says (kafeed.loader.sources.read_ahead; applied by
kafeed.loader.sources.kafka_flow).

Records are fetched in batches (``consume(num_messages=...)``) into one small queue per
partition. A partition's queue never holds more than ``queue_records``: a ``consume()`` asks
for no more records than the least room below that cap, and a partition at the cap is
paused; should a call still bring records of it beyond the cap, they are dropped and fetched
again after it resumes (:meth:`KafkaFlow.seek_back <kafeed.loader.sources.kafka_flow.KafkaFlow.seek_back>`).
A record the consumer hands out again (its fetch position went back, as a seek to the log
start does when retention overtook a partition) is dropped as it comes, so it takes no turn.
The cold tier's partitions are filled from their archive tables first
(kafeed.loader.sources.cold_tier).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from kafeed.kafka import message_event
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.cold_tier import ColdTier
from kafeed.loader.sources.kafka_flow import KafkaFlow
from kafeed.loader.sources.kafka_partitions import KafkaPartitions
from kafeed.loader.sources.partition import Entry, Partition
from kafeed.loader.sources.read_ahead import CHECK_S, REFILL_S, ReadAhead, pull_size
from kafeed.loader.sources.source import Shards
from kafeed.loader.workers.parent import ParentWatch
from kafeed.loader.workers.prefetch import Stopped, check_running

log = logging.getLogger("kafeed")

STOP_CHECK_S = 0.1  # with a stop hook, a wait for records looks at it this often


def _entry(msg: Any) -> Entry:
    """A consumed record as its partition queues it (kafeed.loader.sources.partition)."""
    return msg.offset(), msg.value(), msg.timestamp()[1], len(msg), msg.key()


class KafkaFetcher:
    """Fetches ``consumer``'s records into the queues of the reader's ``shards``, whose
    partitions ``partitions`` keeps, under the read-ahead ``ahead`` that ``flow`` applies.
    ``log_error``: how a Kafka error that librdkafka retries is told."""

    def __init__(self, settings: LoaderSettings, consumer: Any, shards: Shards, *, index: int,
                 partitions: KafkaPartitions, flow: KafkaFlow, ahead: ReadAhead,
                 cold_tier: ColdTier, parent: ParentWatch | None,
                 log_error: Callable[[Any], None]) -> None:
        self._settings = settings
        self._consumer = consumer
        self._shards = shards
        self._parts = shards.parts  # the reader's order (the same list)
        self._index = index
        self._by_tp = partitions.by_tp  # the same dict: partitions come and go in it
        self._flow = flow
        self._ahead = ahead
        self._cold_tier = cold_tier
        self._parent = parent  # in a DataLoader worker: end when the trainer is gone
        self.stop: threading.Event | None = None  # on a prefetch thread: end when it is set
        self._log_error = log_error
        # At the start, when a take's look may pull again: CHECK_S after the last pull ended,
        # not after the look began (a pull slower than CHECK_S made every take pull again).
        self._next_look = 0.0

    def fetch(self, timeout: float) -> int:
        """Records from librdkafka into the queues: one ``consume()`` waiting up to
        ``timeout``, more at once while librdkafka has them and the queues are below the
        target; then pause or resume. Returns how many records were queued or restored.

        Stopping earlier (once the waiting partition had a record, or after half a look's
        time) took 1.35x the CPU per token on a 30M-token read (benchmarks/bench_loader.py):
        the queues ran dry more often, and each refill paused and resumed partitions. At the
        start (:attr:`ReadAhead.starting <kafeed.loader.sources.read_ahead.ReadAhead.starting>`)
        it makes one more call at most: librdkafka fetches faster than this loop moves its
        records, so before the first batch the loop went on for the whole topic (a 61 MB one:
        25,000 records in 170 ms, where the batch needed 2,000), and later takes bring the
        rest as they need it."""
        queued, more = self.pull(timeout)
        ahead = self._ahead
        if ahead.starting:
            # One batch's worth: the first call, before any record was seen, asks for 16.
            if more and ahead.want_more and queued < self._settings.consume_batch:
                queued += self.pull(0)[0]
            self._next_look = time.monotonic() + CHECK_S
        else:
            while more and ahead.want_more:
                got, more = self.pull(0)
                queued += got
        self.hold()
        return queued

    def hold(self) -> None:
        """Hold the queues near the target: resume, refill and pause partitions as the
        read-ahead policy says (kafeed.loader.sources.read_ahead explains why)."""
        flow = self._flow
        live = flow.live()
        if flow.resume_short(live):
            # Refill to the target at once and pause again: left running until the next
            # take (a whole training step later, maybe), the fetcher would bring in far more.
            ahead = self._ahead
            deadline = time.monotonic() + min(REFILL_S, self._settings.poll_timeout_s)
            while ahead.want_more:
                left = deadline - time.monotonic()
                # Every partition paused (at its cap, below a target in bytes): nothing
                # more can come, and a pull would wait out the deadline for it.
                if left <= 0 or all(p.paused for p in live) or not self.pull(left)[0]:
                    break
        flow.pause_full(live)

    def pull(self, timeout: float) -> tuple[int, bool]:
        """One consume() call sized to the room left: (records queued or restored, whether
        it brought all it asked for, so librdkafka may hold more)."""
        check_running(self._parent, self.stop, self._index)
        if self._settings.bounded:
            timeout = min(timeout, 0.05)
        cold = self._cold_tier
        queued = cold.fetch(self._by_tp, self._consumer, self._keep_restored) if cold.parts else 0
        if queued:
            timeout = 0  # records are waiting: take what Kafka has, do not wait for more
        consume = self._consumer.consume
        ahead = self._ahead
        limit = self._settings.queue_records
        # A partition caught up at the end of its log brings none, so its room does not count
        # (should records arrive for it meanwhile, KafkaFlow.seek_back guards the cap).
        batch = pull_size(ahead, [p for p in self._parts if not p.paused and not p.fetch_done
                                  and not p.eof and p.cold_until is None],
                          self._settings.consume_batch, limit)
        if self._settings.bounded:
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
        brought = len(msgs)
        fresh = fresh_bytes = 0  # records queued from this call, and their bytes
        # Each message is let go as soon as it is queued: alive in a list of a whole call, they
        # outlived the collector's young passes (the queue's entries each count one more object
        # for them) and were promoted, which brings on its full passes (kafeed.loader.sources.partition).
        msgs.reverse()
        take_next = msgs.pop
        while msgs:
            msg = take_next()
            err = msg.error()
            if err is not None:
                # An ACL refusal or a fatal error ends the read (retrying cannot help): raised.
                who = self._settings.connection.sasl_username or "this client"
                event = message_event(err, action=f"read topic {msg.topic()!r} as {who}")
                if event == "end":
                    eof_part = by_tp.get((msg.topic(), msg.partition()))
                    if eof_part is not None and eof_part.key not in over:
                        eof_part.eof = True
                        if eof_part.end is not None and msg.offset() >= eof_part.end:
                            eof_part.fetch_done = True
                            finished.append(eof_part)
                elif event == "reset":
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
                    floor = part.queued_to()
            if part is None or part.cold_until is not None:
                continue
            offset = msg.offset()
            if offset < floor:
                # Taken or queued already: librdkafka hands records out again when its fetch
                # position goes back (a seek below what was fetched). A copy queued and skipped
                # at its turn would give that turn away and change the order.
                if offset in part.restore:
                    self._keep_restored(part, _entry(msg), part.decode)
                    queued += 1
                continue
            if len(queue) >= limit and not part.fetch_done:
                # Paused at its cap, but this call's records of it were fetched before the
                # pause: dropped, and read again from the first of them (KafkaFlow.seek_back).
                if part.key not in over:
                    over[part.key] = (part, offset)
                continue
            end = part.end
            if end is not None and offset >= end:
                part.fetch_done = True
                finished.append(part)
                continue
            nbytes = len(msg)  # the entry as _entry() makes it, inline in the hot loop
            queue.append((offset, msg.value(), msg.timestamp()[1], nbytes, msg.key()))
            floor = offset + 1
            fresh_bytes += nbytes
            fresh += 1
            part.eof = False
            if end is not None and offset + 1 >= end:
                part.fetch_done = True
                finished.append(part)
            if len(queue) >= limit and not part.paused:
                self._flow.pause([part], True)
        if fresh:
            ahead.added(fresh_bytes, fresh)
            queued += fresh
        if over:
            self._flow.seek_back(list(over.values()))
        if finished:
            # Fetched to their end: paused, since a partition at the end of its log keeps its
            # leader's fetch requests waiting (fetch.wait.max.ms, 500 ms), and a partition of
            # the same leader that is resumed meanwhile waits behind them.
            self._flow.pause([p for p in {id(p): p for p in finished}.values() if not p.paused], True)
        return queued, brought >= batch

    def _wait_for_one(self, timeout: float) -> list[Any]:
        """``consume(num_messages=1, timeout)``, in slices of ``STOP_CHECK_S`` that look at the
        stop hook in between when there is one. librdkafka counts whole milliseconds and drops
        the rest, so the wait is rounded up: ended early, it would leave a caller that waits
        for a deadline (``max_wait_s``) spinning until then."""
        timeout = math.ceil(timeout * 1000) / 1000
        consume = self._consumer.consume
        if self.stop is None:
            msgs: list[Any] = consume(num_messages=1, timeout=timeout)
            return msgs
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            msgs = consume(num_messages=1, timeout=max(0.0, min(left, STOP_CHECK_S)))
            if msgs or left <= STOP_CHECK_S:
                return msgs
            if self.stop.is_set():
                raise Stopped(f"reader {self._index} was stopped")

    def top_up(self, now: float) -> None:
        """Every ``CHECK_S`` while records are taken: update the rate, pause or resume, and
        move what librdkafka has fetched into the queues while they hold less than the target
        (never waiting), so its fetcher keeps going."""
        ahead = self._ahead
        ahead.tick(now)
        if ahead.want_more and not (ahead.starting and now < self._next_look):
            self.fetch(0)
        else:
            self.hold()

    def _out_of_range(self, topic: str, partition: int) -> None:
        """Retention deleted a partition's records before the consumer fetched them."""
        from kafeed.kafka.types import TopicPartition

        part = self._by_tp.get((topic, partition))
        if part is None or part.cold_until is not None:
            return
        if topic in self._cold_tier.tables:
            self._cold_tier.overtaken(part, self._consumer)
            return
        # Not archived: read on from the log start, as "earliest" always did.
        log.warning("kafeed loader: records of %s were deleted before they were read; "
                    "reading on from its log start", part.key)
        self._consumer.seek(TopicPartition(topic, partition, -2))

    def _keep_restored(self, part: Partition, entry: Entry, decode: Callable[[Entry], Any]) -> None:
        """An in-flight record of an exact resume, re-read from Kafka or the table."""
        offset = entry[0]
        part.restore.discard(offset)
        self._shards.restore((part.key, offset), decode(entry))
        part.stamps[offset] = entry[2]

    def restore(self) -> None:
        """Re-read the in-flight records of an exact resume (shuffle buffer, packer carry)."""
        waiting = [p for p in self._parts if p.restore]
        while any(p.restore for p in waiting):
            self.fetch(self._settings.poll_timeout_s)
            for p in waiting:
                if p.restore and (p.fetch_done or p.queue):
                    lost = sorted(p.restore)
                    p.in_flight -= p.restore
                    log.warning("kafeed loader: %d in-flight record(s) of %s are gone (retention?): %s",
                                len(lost), p.key, lost[:5])
                    p.restore.clear()

