"""The exactly-once consume-transform-produce loop that every stage runs on.

One batch is one Kafka transaction: consume up to ``batch_size`` records
(read_committed; over several consume calls when ``poll_records`` is smaller, so the
fixed cost of a transaction is spread over many records), run the stage's batch
function (:meth:`Stage.process`), produce its outputs, dead letters and state
changelog entries, add the input positions (last processed offset + 1) with
``send_offsets_to_transaction`` (KIP-447: one producer per process, fenced through
the consumer group's metadata), commit.

With ``overlap_commit`` (the default) batch N's :meth:`Stage.finish` (waiting for
work the stage started in threads of its own, such as a tokenizer's) and its
produce-and-commit run on a helper thread while the main thread consumes batch N+1
and runs the stage on it; N+1 is produced only after N committed. If N fails, N+1
is discarded with it.

With ``purge_input_every_s`` the input's committed records are deleted as it goes
(:mod:`kafeed.stream.purge`).

Errors: a retriable error retries the call; an abortable one aborts, rolls back
the stage's pending state and seeks the consumer back to the failed batch's first
offsets (the last committed positions), so it is read again; a fatal one (fenced)
rebuilds the producer, then rewinds the same way. Rebalance callbacks run inside
``consume()``: they first wait for the in-flight transaction to finish (or abort
it), then drop (revoke) or rebuild from the changelog (assign) the partitions' state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, KafkaOperationError
from kafeed.kafka import KafkaClients, TransactionalProducer
from kafeed.kafka.producer import MAX_ATTEMPTS
from kafeed.stream.batch import RecordBatch
from kafeed.stream.consume import consume_batch
from kafeed.stream.drains import InputDrains
from kafeed.stream.identity import claim_instance
from kafeed.stream.purge import InputPurge
from kafeed.stream.records import BatchResult, Record
from kafeed.stream.restore import restore_partitions
from kafeed.stream.settings import StreamSettings
from kafeed.stream.stage import ReportT, Stage
from kafeed.stream.stats import StreamCounters
from kafeed.stream.step_clients import close_step_consumer, make_consumer, make_producer, produce_dead_letter
from kafeed.stream.topics import ensure_topics
from kafeed.topics import TopicAdmin

log = logging.getLogger("kafeed")


class StreamProcessor(Generic[ReportT]):
    """Owns the consumer, the transactional producer and the stage of one worker process.

    Every client comes from ``clients`` (default: ``KafkaClients(connection)``; a
    :class:`~kafeed.kafka.FakeKafka` runs the loop in memory).
    """

    def __init__(
        self, stage: Stage[ReportT], settings: StreamSettings, connection: ConnectionSettings, *,
        stop_event: threading.Event | None = None, on_progress: Callable[[ReportT], None] | None = None,
        clients: KafkaClients | None = None,
    ) -> None:
        self.stage = stage
        self.settings = settings
        self.connection = connection
        self.clients = clients or KafkaClients(connection)
        self._given_clients = clients  # None: TopicAdmin probes the cluster before its first request
        self.stop_event = stop_event or threading.Event()
        self.on_progress = on_progress
        self.counters = StreamCounters(stage.name, settings.inputs, settings.outputs)
        self.producer: TransactionalProducer | None = None
        self._consumer: Any = None
        self._assigned: set[tuple[str, int]] = set()  # (input topic, partition)
        self._revoked: set[tuple[str, int]] = set()  # revoked during the current consume call
        self._started = 0.0
        self._dlq_limit = 0
        self._failures = 0  # transactions in a row that did not commit
        self._inflight: tuple[RecordBatch, BatchResult, Future[float]] | None = None
        self._rewind_records: list[Record] = []
        self._admin: TopicAdmin | None = None
        self._drains: InputDrains | None = None  # made at the first caught-up check
        self._input_purge = InputPurge(settings.inputs[0], settings.purge_input_every_s)
        self._commit_pool: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafeed-commit")
            if settings.kafka.overlap_commit else None)

    # -- rebalance callbacks (run inside consume()) ------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._settle()
        inputs = self.settings.inputs
        tps = [(tp.topic, tp.partition) for tp in partitions if tp.topic in inputs]
        self.counters.rebalances += 1
        changelog = self.settings.changelog_topic
        if changelog is not None and tps:  # a stage with state reads one input (StreamSettings)
            parts = [p for _, p in tps]
            read = restore_partitions(self.clients, self.stage, changelog, parts,
                                      timeout_s=self.settings.state_rebuild_timeout_s)
            self.counters.state_records_read += read
            log.info("assigned %s; state rebuilt from %d changelog records", parts, read)
        self._assigned.update(tps)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # Finish (or abort) the open transaction before the partitions move: nothing doubles.
        self._settle()
        self.counters.rebalances += 1
        for tp in partitions:
            self._assigned.discard((tp.topic, tp.partition))
            self._revoked.add((tp.topic, tp.partition))
            self.stage.drop(tp.partition)
        log.info("revoked %s", [f"{tp.topic}/{tp.partition}" for tp in partitions])

    # -- one batch -------------------------------------------------------------------------------

    def _send(self, records: RecordBatch, result: BatchResult, metadata: Any) -> float:
        """Produce one batch's outputs and commit them with its input positions (any thread).

        Returns when the commit finished (monotonic), which ends the busy time if it is the last.
        """
        p = self.producer
        assert p is not None  # run() made it
        self.stage.finish(result)  # before begin: the transaction's clock starts after it
        p.begin()
        p.produce_many(result.outputs)
        for topic, keys, values, headers in result.columns:
            p.produce_columns(topic, keys, values, headers)
        for bad in result.dead_letters:
            produce_dead_letter(p, bad, topic=self.settings.dlq_topic, stage=self.stage.name,
                                limit=self._dlq_limit)
        changelog = self.settings.changelog_topic
        if changelog is not None:
            for partition, key, value in result.changelog:
                p.produce(changelog, value, key, partition=partition)
        p.send_offsets(records.positions(), metadata)
        p.commit()
        return time.monotonic()

    def _submit(self, records: RecordBatch, result: BatchResult) -> None:
        metadata = self._consumer.consumer_group_metadata()
        if self._commit_pool is None:
            future: Future[float] = Future()
            try:
                future.set_result(self._send(records, result, metadata))
            except Exception as exc:
                future.set_exception(exc)
        else:
            future = self._commit_pool.submit(self._send, records, result, metadata)
        self._inflight = (records, result, future)

    def _settle(self) -> None:
        """Wait for the in-flight transaction; count it, or undo it and mark its records for rewind."""
        if self._inflight is None:
            return
        records, result, future = self._inflight
        self._inflight = None
        try:
            done = future.result()
        except KafeedError as exc:
            if exc.code is None:  # not the transaction's failure (a code is librdkafka's)
                raise
            log.warning("batch of %d aborted: %s", len(records), exc)
            self._recover(exc)
            self._rewind_records.extend(records)
            return
        self.stage.committed(result)
        self.counters.committed(records, result, done)
        self._failures = 0
        self._input_purge.committed(records)

    def _recover(self, exc: Exception) -> None:
        """Undo a failed transaction: the stage's pending state, then the transaction itself."""
        self.stage.rolled_back()
        self.counters.aborted_batches += 1
        self._failures += 1
        assert self.producer is not None
        if self.producer.recover(exc):
            self.counters.producer_rebuilds += 1
        if self._failures >= 10 * MAX_ATTEMPTS:
            raise KafkaOperationError(
                f"{self._failures} transactions in a row failed to commit.",
                hint="Check the broker logs and the transaction coordinator; run with -v for details.")

    def _rewind(self, discarded: Sequence[Record]) -> None:
        """Seek every still-assigned partition back to the first offset not committed."""
        from kafeed.kafka.types import TopicPartition

        starts: dict[tuple[str, int], int] = {}
        for r in (*self._rewind_records, *discarded):
            tp = (r.topic, r.partition)
            starts[tp] = min(starts.get(tp, r.offset), r.offset)
        self._rewind_records = []
        for (topic, partition), offset in starts.items():
            if (topic, partition) not in self._assigned:
                continue  # revoked meanwhile: the next owner reads from the committed offset
            try:
                self._consumer.seek(TopicPartition(topic, partition, offset))
            except KafeedError as seek_exc:
                log.info("seek %s/%d failed: %s", topic, partition, seek_exc)

    # -- the loop --------------------------------------------------------------------------------

    def caught_up(self) -> bool:
        """True when the group has committed every partition of every input (whichever member
        held it) up to the end it had at the first check (:class:`kafeed.kafka.Drain`, one per
        input topic).

        A partition a dead member still holds is waited for: the session timeout hands it to a
        live member. Raises DrainIncomplete when no partition of an input moved for the drain's bound.
        """
        if self._drains is None:
            self._drains = InputDrains(self.connection, self.settings, stage=self.stage.name,
                                       clients=self.clients)
        return self._drains.done(self._consumer, self._assigned)

    def snapshot(self) -> ReportT:
        return self.stage.report(self.counters.snapshot(time.monotonic() - self._started))

    def run(self, *, until_caught_up: bool = False, upstream: Callable[[], bool] | None = None) -> ReportT:
        """Process until ``stop_event`` is set (or, with ``until_caught_up``, until idle at the end).

        ``upstream``: the input is written by another stage; being caught up counts only
        once this returns True (that stage finished and committed everything, in every process).
        """
        s = self.settings
        self._started = time.monotonic()
        admin = self._admin = TopicAdmin(self.connection, clients=self._given_clients)
        ensure_topics(admin, s)
        limits = {t: admin.max_message_bytes(t) for t in s.outputs}
        self._dlq_limit = admin.max_message_bytes(s.dlq_topic)
        self.stage.bind(limits)
        lock = claim_instance(self.stage.name, s.group, s.instance)
        transactional_id = f"kafeed-{self.stage.name}.{s.group}.{lock.name}"
        log.info("%s %s -> %s as %s", self.stage.name, ", ".join(s.inputs), ", ".join(s.outputs),
                 transactional_id)
        try:
            self.producer = make_producer(self.clients, s, self.stage.name,
                                          transactional_id=transactional_id,
                                          max_message_bytes=max(*limits.values(), self._dlq_limit))
            self._consumer = make_consumer(self.clients, s, self.stage.name)
            self._consumer.subscribe(list(s.inputs), on_assign=self._on_assign, on_revoke=self._on_revoke,
                                     on_lost=self._on_revoke)
            self._loop(until_caught_up, upstream)
        finally:
            if self._consumer is not None:
                close_step_consumer(self._consumer, s, self.stage.name)
            if self.producer is not None:
                self.producer.flush(5)
            if self._drains is not None:
                self._drains.close()
            self.stage.close()
            if self._commit_pool is not None:
                self._commit_pool.shutdown(wait=True)
            lock.release()
        return self.snapshot()

    def _loop(self, until_caught_up: bool, upstream: Callable[[], bool] | None) -> None:
        s = self.settings
        last_data = time.monotonic()
        while not self.stop_event.is_set():
            records = consume_batch(self._consumer, s, self.counters, self._revoked, self.stop_event)
            result = None
            if records and not self._rewind_records:
                last_data = time.monotonic()
                if self.counters.first_data is None:
                    self.counters.first_data = last_data
                result = self.stage.process(records)  # overlaps the in-flight commit
            elif not records and self._inflight is not None and not self._inflight[2].done():
                # Nothing yet: keep consuming, so that a batch arriving while the previous one
                # commits is processed meanwhile instead of after it.
                continue
            self._settle()
            if self._rewind_records:
                self._rewind(records)
                continue
            if result is not None:
                self._submit(records, result)
            elif (until_caught_up and time.monotonic() - last_data >= s.idle_s
                  and (upstream is None or upstream()) and self.caught_up()):
                break
            self._input_purge.purge(self._admin)
            if self.on_progress is not None:
                self.on_progress(self.snapshot())
        self._settle()
        if self._rewind_records:
            self._rewind(())
        self._input_purge.purge(self._admin, final=True)
