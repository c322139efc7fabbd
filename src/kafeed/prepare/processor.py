"""The transactional consume-transform-produce loop behind `kafeed prepare`.

One batch is one Kafka transaction: consume up to ``batch_size`` records, run the
stages (:class:`~kafeed.prepare.pipeline.BatchPipeline`), produce documents,
dead letters and dedup changelog entries, add the input positions (last
processed offset + 1) with ``send_offsets_to_transaction`` (KIP-447: one producer
per process, fenced through the consumer group's metadata), commit.

With ``overlap_commit`` (the default) batch N's produce-and-commit runs on a
helper thread while the main thread consumes batch N+1 and runs its stages; N+1
is produced only after N committed. If N fails, N+1 is discarded with it.

Errors: a retriable error retries the call; an abortable one aborts, rolls back
the pending dedup hashes and seeks the consumer back to the failed batch's first
offsets (the last committed positions), so it is read again; a fatal one
(fenced) rebuilds the producer, then rewinds the same way. Rebalance callbacks
run inside ``consume()``: they first wait for the in-flight transaction to finish
(or abort it), then drop (revoke) or rebuild (assign) the partitions' dedup state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafkaOperationError, translate_kafka_error
from kafeed.prepare import metrics
from kafeed.prepare.changelog import ensure_topics, rebuild_seen
from kafeed.prepare.decode import RawRecord
from kafeed.prepare.dedup import DedupState
from kafeed.prepare.identity import claim_instance
from kafeed.prepare.pipeline import BatchPipeline, BatchResult
from kafeed.prepare.settings import PrepareSettings
from kafeed.prepare.stats import PrepareStats, StatsAccumulator
from kafeed.prepare.tokenize import BatchTokenizer, load_tokenizer
from kafeed.telemetry.stats import client_stats_config
from kafeed.topics import TopicAdmin

log = logging.getLogger("kafeed")

ProgressFn = Callable[[PrepareStats], None]
_MAX_ATTEMPTS = 5
_DLQ_MAX_VALUE = 900_000  # bytes of the original value kept in a dead letter


class _Rewind(Exception):
    """The batch's transaction did not commit; it will be read again."""


class PrepareProcessor:
    """Owns the consumer, the transactional producer and the dedup state of one worker."""

    def __init__(
        self, settings: PrepareSettings, connection: ConnectionSettings, *,
        tokenizer: BatchTokenizer | None = None, stop_event: threading.Event | None = None,
        on_progress: ProgressFn | None = None,
    ) -> None:
        self.settings = settings
        self.connection = connection
        self.tokenizer = tokenizer or load_tokenizer(settings.tokenizer)
        self.stop_event = stop_event or threading.Event()
        self.on_progress = on_progress
        self.pipeline = BatchPipeline(settings, self.tokenizer)
        self.dedup = DedupState()
        self.stats = StatsAccumulator()
        self._assigned: set[int] = set()
        self._txn_open = False
        self._producer: Any = None
        self._consumer: Any = None
        self._started = 0.0
        self._transactional_id = ""
        self._failures = 0  # transactions in a row that did not commit
        self._inflight: tuple[list[RawRecord], BatchResult, Future[None]] | None = None
        self._rewind_records: list[RawRecord] = []
        self._commit_pool: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafeed-commit")
            if settings.kafka.overlap_commit else None)

    # -- clients -------------------------------------------------------------------------------

    def _base(self) -> dict[str, Any]:
        return self.connection.client_config() | {"logger": logging.getLogger("kafeed.librdkafka")}

    def _make_producer(self) -> Any:
        from confluent_kafka import Producer

        k = self.settings.kafka
        producer = Producer(self._base() | {
            "transactional.id": self._transactional_id,
            "transaction.timeout.ms": k.transaction_timeout_ms,
            "message.timeout.ms": k.effective_message_timeout_ms(),
            "linger.ms": k.linger_ms,
            "compression.type": k.compression,
            "queue.buffering.max.messages": max(100_000, 4 * k.batch_size),
            "enable.idempotence": True,
            "acks": "all",
            "delivery.report.only.error": True,
            "on_delivery": metrics.on_delivery,
        } | client_stats_config("prepare"))
        try:
            producer.init_transactions(k.transaction_timeout_ms / 1000)
        except Exception as exc:
            raise translate_kafka_error(
                exc, action=f"start transactions as {self._transactional_id!r}") from exc
        return producer

    def _make_consumer(self) -> Any:
        from confluent_kafka import Consumer

        k = self.settings.kafka
        return Consumer(self._base() | {
            "group.id": self.settings.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": k.auto_offset_reset,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": k.session_timeout_ms,
            "fetch.max.bytes": k.fetch_max_bytes,
            "max.partition.fetch.bytes": k.max_partition_fetch_bytes,
        } | client_stats_config("prepare"))

    # -- rebalance callbacks (run inside consume()) -----------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._settle()
        parts = [tp.partition for tp in partitions if tp.topic == self.settings.input]
        self.stats.rebalances += 1
        if self.settings.dedup.enabled and parts:
            seen = rebuild_seen(self.connection, self.settings.changelog_topic, parts,
                                timeout_s=self.settings.dedup.rebuild_timeout_s)
            for p in parts:
                self.dedup.load_partition(p, seen.get(p, set()))
            log.info("assigned %s; dedup state rebuilt (%d hashes)", parts,
                     sum(len(s) for s in seen.values()))
        self._assigned.update(parts)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # Finish (or abort) the open transaction before the partitions move: nothing doubles.
        self._settle()
        self.stats.rebalances += 1
        for tp in partitions:
            self._assigned.discard(tp.partition)
            self.dedup.drop_partition(tp.partition)
        log.info("revoked %s", [tp.partition for tp in partitions])

    # -- one batch ----------------------------------------------------------------------------------

    def _produce(self, topic: str, **kwargs: Any) -> None:
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)

    def _retrying(self, what: str, fn: Callable[[], Any]) -> Any:
        from confluent_kafka import KafkaException

        for attempt in range(_MAX_ATTEMPTS):
            try:
                return fn()
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and not err.txn_requires_abort() and attempt + 1 < _MAX_ATTEMPTS:
                    log.info("%s: retriable error %s, retrying", what, err)
                    metrics.count_retry()
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise
        return None

    def _send(self, result: BatchResult, records: Sequence[RawRecord], metadata: Any) -> None:
        """Produce one batch's outputs and commit them with its input positions (any thread)."""
        from confluent_kafka import TopicPartition

        s = self.settings
        timeout = s.kafka.transaction_timeout_ms / 1000
        p = self._producer
        p.begin_transaction()
        self._txn_open = True
        for doc in result.documents:
            self._produce(s.output, key=doc.key, value=doc.value)
        for bad in result.dead_letters:
            r = bad.record
            headers = [
                ("kafeed.error.kind", bad.kind.encode()),
                ("kafeed.error.reason", bad.reason.encode("utf-8", "replace")),
                ("kafeed.source.topic", r.topic.encode()),
                ("kafeed.source.partition", str(r.partition).encode()),
                ("kafeed.source.offset", str(r.offset).encode()),
                *r.headers,
            ]
            value = r.value
            if value is not None and len(value) > _DLQ_MAX_VALUE:
                # Headers push a near-limit record over message.max.bytes; the source offset
                # still finds the original.
                value = None
                headers.append(("kafeed.error.value_dropped", b"true"))
            self._produce(s.dlq_topic, key=r.key, value=value, headers=headers)
        for partition, key, value in result.changelog:
            self._produce(s.changelog_topic, partition=partition, key=key, value=value)
        positions = [TopicPartition(t, part, off) for (t, part), off in result.positions.items()]
        self._retrying("send offsets", lambda: p.send_offsets_to_transaction(positions, metadata, timeout))
        self._retrying("commit", lambda: p.commit_transaction(timeout))
        self._txn_open = False

    def _submit(self, records: list[RawRecord], result: BatchResult) -> None:
        metadata = self._consumer.consumer_group_metadata()
        if self._commit_pool is None:
            future: Future[None] = Future()
            try:
                self._send(result, records, metadata)
                future.set_result(None)
            except Exception as exc:
                future.set_exception(exc)
        else:
            future = self._commit_pool.submit(self._send, result, records, metadata)
        self._inflight = (records, result, future)

    def _settle(self) -> None:
        """Wait for the in-flight transaction; count it, or undo it and mark its records for rewind."""
        from confluent_kafka import KafkaException

        if self._inflight is None:
            return
        records, result, future = self._inflight
        self._inflight = None
        try:
            future.result()
        except KafkaException as exc:
            log.warning("batch of %d aborted: %s", len(records), exc)
            self._recover(exc)
            self._rewind_records.extend(records)
            return
        self.dedup.commit()
        self.stats.add(result.counts)
        metrics.count_committed(records, result, input_topic=self.settings.input,
                                output_topic=self.settings.output)
        self.stats.last_commit = time.monotonic()
        self._failures = 0

    def _recover(self, exc: Exception) -> None:
        """Undo a failed transaction: abort it, or rebuild the producer when that is impossible."""
        from confluent_kafka import KafkaException

        self.dedup.rollback()
        self.stats.aborted_batches += 1
        metrics.count_abort()
        self._failures += 1
        err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        fatal = err is not None and err.fatal()
        if not fatal and self._txn_open:
            try:
                self._producer.abort_transaction(self.settings.kafka.transaction_timeout_ms / 1000)
            except KafkaException as abort_exc:
                log.warning("abort failed (%s); rebuilding the producer", abort_exc)
                fatal = True
        self._txn_open = False
        if fatal:
            log.warning("producer failed fatally (%s); rebuilding it", exc)
            self._producer = None
            self._producer = self._make_producer()
            self.stats.producer_rebuilds += 1
        if self._failures >= 10 * _MAX_ATTEMPTS:
            raise KafkaOperationError(
                f"{self._failures} transactions in a row failed to commit.",
                hint="Check the broker logs and the transaction coordinator; run with -v for details.")

    def _rewind(self, discarded: Sequence[RawRecord]) -> None:
        """Seek every still-assigned partition back to the first offset not committed."""
        from confluent_kafka import KafkaException, TopicPartition

        starts: dict[tuple[str, int], int] = {}
        for r in (*self._rewind_records, *discarded):
            tp = (r.topic, r.partition)
            starts[tp] = min(starts.get(tp, r.offset), r.offset)
        self._rewind_records = []
        for (topic, partition), offset in starts.items():
            if partition not in self._assigned:
                continue  # revoked meanwhile: the next owner reads from the committed offset
            try:
                self._consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as seek_exc:
                log.info("seek %s/%d failed: %s", topic, partition, seek_exc)

    # -- the loop -----------------------------------------------------------------------------------

    def _caught_up(self) -> bool:
        from confluent_kafka import TopicPartition

        if not self._assigned:
            # No partitions: done once the group has had time to hand us some.
            return time.monotonic() - self._started > self.settings.kafka.session_timeout_ms / 1000
        tps = [TopicPartition(self.settings.input, p) for p in sorted(self._assigned)]
        positions = {tp.partition: tp.offset for tp in self._consumer.position(tps)}
        missing = [tp for tp in tps if positions.get(tp.partition, -1) < 0]
        if missing:
            for tp in self._consumer.committed(missing, timeout=10):
                positions[tp.partition] = tp.offset
        for tp in tps:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            pos = positions.get(tp.partition, -1)
            if high > low and (pos < 0 or pos < high):
                return False
        return True

    def _elapsed(self) -> float:
        return time.monotonic() - self._started

    def snapshot(self) -> PrepareStats:
        return self.stats.snapshot(self._elapsed())

    def run(self, *, until_caught_up: bool = False) -> PrepareStats:
        s = self.settings
        self._started = time.monotonic()
        ensure_topics(TopicAdmin(self.connection), s)
        lock = claim_instance(s.group, s.instance)
        self._transactional_id = f"kafeed-prepare.{s.group}.{lock.name}"
        log.info("prepare %s -> %s as %s", s.input, s.output, self._transactional_id)
        try:
            self._producer = self._make_producer()
            self._consumer = self._make_consumer()
            self._consumer.subscribe([s.input], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                     on_lost=self._on_revoke)
            self._loop(until_caught_up)
        finally:
            if self._consumer is not None:
                try:
                    self._consumer.close()
                except Exception as exc:
                    log.warning("consumer close failed: %s", exc)
            if self._producer is not None:
                self._producer.flush(5)
            self.pipeline.close()
            if self._commit_pool is not None:
                self._commit_pool.shutdown(wait=True)
            lock.release()
        return self.snapshot()

    def _loop(self, until_caught_up: bool) -> None:
        from confluent_kafka import KafkaError

        s = self.settings
        last_data = time.monotonic()
        while not self.stop_event.is_set():
            msgs = self._consumer.consume(num_messages=s.kafka.batch_size,
                                          timeout=s.kafka.consume_timeout_s)
            records: list[RawRecord] = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.fatal():
                        raise translate_kafka_error(err, action=f"consume {s.input!r}")
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("consumer: %s", err)
                    continue
                records.append(RawRecord(
                    topic=m.topic(), partition=m.partition(), offset=m.offset(), key=m.key(),
                    value=m.value(), headers=tuple(m.headers() or ()), timestamp_ms=m.timestamp()[1],
                ))
            result = None
            if records and not self._rewind_records:
                last_data = time.monotonic()
                if self.stats.first_data is None:
                    self.stats.first_data = last_data
                result = self.pipeline.run(records, self.dedup)  # overlaps the in-flight commit
            self._settle()
            if self._rewind_records:
                self._rewind(records)
                continue
            if result is not None:
                self._submit(records, result)
            elif until_caught_up and time.monotonic() - last_data >= s.idle_s and self._caught_up():
                break
            if self.on_progress is not None:
                self.on_progress(self.snapshot())
        self._settle()
        if self._rewind_records:
            self._rewind(())


def run_prepare(
    settings: PrepareSettings, connection: ConnectionSettings, *, until_caught_up: bool = False,
    stop_event: threading.Event | None = None, on_progress: ProgressFn | None = None,
    tokenizer: BatchTokenizer | None = None,
) -> PrepareStats:
    """Run prepare until ``stop_event`` is set (or, with ``until_caught_up``, until idle at the end)."""
    return PrepareProcessor(settings, connection, tokenizer=tokenizer, stop_event=stop_event,
                            on_progress=on_progress).run(until_caught_up=until_caught_up)
