"""The archive sink: a topic's records into an Iceberg table, exactly once.

The table is the only truth about progress. On every assignment the sink reads the
positions from the table's snapshot summaries (kafeed.archive.position) and seeks there;
each commit appends the batch's rows and the new positions in one catalog commit, decided
against the table as it is at that moment (kafeed.archive.commit). A commit that lost a
race, or whose outcome is unknown, is decided again on the refreshed table, so a retry can
never add a row twice. The consumer group only divides partitions between sinks; its
offsets are committed after each table commit as a mirror for lag monitoring.

Positions belong to one topic: a sink refuses a topic deleted and created again under the
same name (kafeed.archive.topic_identity).

With ``until_caught_up`` the sink stops once every partition of the topic, whichever sink
holds it, is archived in the table up to the end it had when the drain began
(:class:`kafeed.kafka.Drain`); a partition a SIGKILLed sink still holds comes to a live one
after the group's session timeout (kafeed.kafka.SESSION_TIMEOUT_MS).

The data files of a commit are written on a helper thread, a chunk at a time, while the sink
consumes the next records (kafeed.archive.pending); only the commit makes them part of the
table. A crash anywhere loses nothing: data files written for a commit that did not land are
orphans no snapshot references, and the next start rereads from the table's positions.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafeed.archive.apply import apply_plan
from kafeed.archive.catalog import open_catalog, open_table
from kafeed.archive.commit import CommitPlan, plan_commit
from kafeed.archive.intake import buffer_messages, chunk_rows, follow_commit
from kafeed.archive.pending import CHUNKS_PER_COMMIT, PendingCommit, warm_up
from kafeed.archive.position import encode_positions, refreshed_positions
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.archive.run_stats import ArchiveStats
from kafeed.archive.schema import offsets_key, topic_id_key
from kafeed.archive.settings import ArchiveSettings
from kafeed.archive.topic_identity import check_same_topic, cluster_id_of
from kafeed.config import ConnectionSettings
from kafeed.errors import CatalogUnavailable
from kafeed.formats import Decoders
from kafeed.kafka import SESSION_TIMEOUT_MS, Drain, KafkaClients, close_consumer, stall_seconds, topic_id

log = logging.getLogger("kafeed")
COMMIT_ATTEMPTS = 20
#: Snapshot summary key naming the sink process that made the commit (for audits).
WRITER_PROPERTY = "kafeed.archive.writer"
#: How often a drain whose own partitions are at their end looks at the table and the topic.
DRAIN_CHECK_S = 0.5


class ArchiveSink:
    """One sink process's loop; several with the same group divide the partitions."""

    def __init__(self, settings: ArchiveSettings, connection: ConnectionSettings, *,
                 stop_event: threading.Event | None = None,
                 on_commit: Callable[[ArchiveStats], None] | None = None) -> None:
        self.settings = settings
        self.connection = connection
        self.stop_event = stop_event or threading.Event()
        self.on_commit = on_commit
        self.stats = ArchiveStats()
        self.mapper = RowMapper(settings.kind, Decoders(settings.formats).of(settings.topic))
        self._consumer: Any = None
        self._table: Any = None
        self._key = ""
        self._id_key = ""
        self._topic_id = ""
        self._expected: dict[int, int | None] = {}  # assigned partition -> table position
        self._eof: dict[int, bool] = {}
        # Consumed records not sealed into a chunk yet, per partition, each in offset order.
        self._buffers: dict[int, RecordBatch] = {}
        self._buffer_since = 0.0  # when the oldest record not committed yet arrived
        self._writer_thread: ThreadPoolExecutor | None = None
        self._pending: PendingCommit | None = None  # sealed chunks of the next commit
        self._assigned = False
        self._writer = f"{socket.gethostname()}-{os.getpid()}"

    # -- start -----------------------------------------------------------------------------
    def open(self) -> None:
        """Connect, and open (or create) the table; every bad-input error comes from here."""
        s = self.settings
        extra: dict[str, Any] = {
            "group.id": s.group_id, "auto.offset.reset": "earliest", "enable.partition.eof": True,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "fetch.max.bytes": 32 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024}
        if s.instance is not None:
            extra["group.instance.id"] = s.instance
        self._writer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafeed-archive-files")
        self._pending = PendingCommit(self._writer_thread)
        # While the group is joined and the catalog opened, load what the first batch would.
        warming = self._writer_thread.submit(warm_up, s.kind)
        try:
            self._consumer = KafkaClients(self.connection).read_committed_consumer(extra, stage="archive")
            cluster_id = cluster_id_of(self._consumer, s.topic)
            self._key = offsets_key(cluster_id, s.topic)
            self._id_key = topic_id_key(cluster_id, s.topic)
            admin = KafkaClients(self.connection).admin()
            self._topic_id = topic_id(admin, s.topic)
            catalog = open_catalog(s.catalog)
            self._table = open_table(catalog, s.table, topic=s.topic, cluster_id=cluster_id, kind=s.kind,
                                     target_file_bytes=s.target_file_bytes)
            check_same_topic(self._table, admin, name=s.table, topic=s.topic, topic_id=self._topic_id,
                             key=self._key, id_key=self._id_key)
            # Only a run that will archive joins the group: a refused one that had joined could
            # wait out librdkafka's close of a join still in progress (60 s in a test run). The
            # assignment is handed over (to _on_assign, which needs the table) in consume().
            self._consumer.subscribe([s.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                     on_lost=self._on_lost)
            warming.result()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._writer_thread is not None:
            self._writer_thread.shutdown(wait=True, cancel_futures=True)
            self._writer_thread = None
        if self._consumer is not None:
            close_consumer(self._consumer, what="archive consumer")
            self._consumer = None

    # -- assignment ------------------------------------------------------------------------
    def _refresh(self) -> dict[int, int]:
        return refreshed_positions(self._table, self._key, name=self.settings.table)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        from kafeed.kafka.types import OFFSET_BEGINNING

        table = self._refresh()
        self.stats.positions = dict(table)
        for tp in partitions:
            pos = table.get(tp.partition)
            tp.offset = OFFSET_BEGINNING if pos is None else pos
            self._expected[tp.partition] = pos
            self._eof[tp.partition] = False
        consumer.assign(partitions)
        self._assigned = True
        log.info("kafeed archive: assigned %s from the table's positions",
                 ", ".join(f"{tp.partition}@{tp.offset}" for tp in partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.flush()  # what was read is committed now; the next owner reads the table
        self._forget(consumer, partitions)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        for tp in partitions:
            self._buffers.pop(tp.partition, None)
        self._staged().drop({tp.partition for tp in partitions})
        self._forget(consumer, partitions)

    def _forget(self, consumer: Any, partitions: list[Any]) -> None:
        for tp in partitions:
            self._expected.pop(tp.partition, None)
            self._eof.pop(tp.partition, None)
        try:
            consumer.unassign()
        except Exception as exc:
            log.debug("kafeed archive: unassign failed: %s", exc)

    # -- the loop --------------------------------------------------------------------------
    def run(self, *, until_caught_up: bool = False) -> ArchiveStats:
        """Archive until stopped (or, with ``until_caught_up``, until the table holds every
        partition of the topic up to the end it had when the drain began, whichever sink
        archived it; DrainIncomplete past the drain's bound). Commits what is buffered before
        returning.

        A running sink commits when the buffer reaches ``target_file_bytes`` or its oldest record
        is ``flush_interval_s`` old, not whenever it has caught up: a sink that keeps up with a
        slow topic would otherwise commit a small file every few records. Every
        ``CHUNKS_PER_COMMIT``-th of ``target_file_bytes`` it seals what it has buffered, and the
        helper thread writes those rows' data files while it consumes on."""
        if self._consumer is None:
            self.open()
        s = self.settings
        chunk_bytes = max(1, s.target_file_bytes // CHUNKS_PER_COMMIT)
        drain = Drain(self.connection, s.topic, what="kafeed archive", group=s.group_id,
                      stall_s=stall_seconds(SESSION_TIMEOUT_MS, s.drain_stall_s)) if until_caught_up else None
        next_check = 0.0
        try:
            while not self.stop_event.is_set():
                self._take(self._consumer.consume(num_messages=s.consume_batch, timeout=0.2))
                caught_up = self._assigned and all(self._eof.values())  # this sink's partitions
                unsealed = sum(b.value_bytes for b in self._buffers.values())
                waiting = bool(self._buffers) or bool(self._staged())
                if waiting and ((until_caught_up and caught_up)
                                or unsealed + self._staged().value_bytes >= s.target_file_bytes
                                or time.monotonic() - self._buffer_since >= s.flush_interval_s):
                    self.flush()
                elif unsealed >= chunk_bytes:
                    self._seal()
                # Done when the table holds every partition, whoever holds it (none held here
                # yet, while a dead sink's session runs out, counts as at the end).
                if (drain is not None and all(self._eof.values()) and not self._buffers
                        and not self._staged() and time.monotonic() >= next_check):
                    next_check = time.monotonic() + DRAIN_CHECK_S
                    if drain.done(self._refresh(), self._expected):
                        break
            self.flush()
        finally:
            if drain is not None:
                drain.close()
            self.close()
        return self.stats

    def _take(self, msgs: list[Any]) -> None:
        """Buffer and decode one consumed batch; the per-message work is reading its fields."""
        buffers = self._buffers
        was_empty = not buffers and not self._staged()
        taken = buffer_messages(msgs, buffers, self._expected, self._eof, topic=self.settings.topic,
                                group=self.settings.group_id)
        if taken:
            if was_empty:
                self._buffer_since = time.monotonic()
            self.stats.records_in += taken
            for buffer in buffers.values():
                self.mapper.decode(buffer)

    # -- committing ------------------------------------------------------------------------
    def _staged(self) -> PendingCommit:
        if self._pending is None:
            raise RuntimeError("the sink is not open")
        return self._pending

    def _seal(self) -> None:
        """Hand the buffered records, as one chunk of rows, to the helper thread to be written."""
        buffers, self._buffers = self._buffers, {}
        if buffers:
            self._staged().add(self._table, *chunk_rows(self.mapper, buffers))

    def flush(self) -> None:
        """Commit the buffered records to the table (decided against its current state)."""
        self._seal()
        pending = self._staged()
        if not pending:
            return
        self._pending = PendingCommit(pending.executor)
        self.stats.value_bytes += pending.value_bytes
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                # Written before the table is read again: the commit decides on the newest state.
                files = pending.files()
            except OSError as exc:  # a full disk, a store that failed: written again below
                log.warning("kafeed archive: writing data files failed (%s); writing them again.", exc)
                files = None
            table = self._refresh()
            plan = plan_commit(table, self._expected, pending.ranges)
            if self._commit(plan, pending, files):
                return
            self.stats.lost_races += 1
            log.info("kafeed archive: commit lost a race (attempt %d); deciding again on the new "
                     "table state", attempt + 1)
            time.sleep(min(0.05 * 2 ** attempt, 2.0))
        raise CatalogUnavailable(
            f"Could not commit to table {self.settings.table!r} after {COMMIT_ATTEMPTS} attempts: "
            "other writers keep committing first.",
            hint="Nothing was lost; restart the sink (it resumes from the table).")

    def _commit(self, plan: CommitPlan, pending: PendingCommit, files: list[Any] | None) -> bool:
        """Apply ``plan``; False when the commit lost a race (or its outcome is unknown)."""
        kept = 0
        if plan.adds_rows:
            written = apply_plan(self._table, plan, pending, files, {
                self._key: encode_positions(plan.positions), self._id_key: self._topic_id,
                WRITER_PROPERTY: self._writer})
            if written is None:
                return False
            kept = written
            self.stats.commits += 1
            self.stats.rows_written += kept
            log.debug("kafeed archive: committed %d rows, positions %s", kept, plan.positions)
        self.stats.already_archived += pending.records - kept
        self._after_commit(plan)
        return True

    def _after_commit(self, plan: CommitPlan) -> None:
        follow_commit(self._consumer, self.settings.topic, plan, self._expected)
        self.stats.positions = dict(plan.positions)
        if self.on_commit is not None:
            self.on_commit(self.stats)


def run_archive(settings: ArchiveSettings, connection: ConnectionSettings, *, until_caught_up: bool = False,
                stop_event: threading.Event | None = None,
                on_commit: Callable[[ArchiveStats], None] | None = None) -> ArchiveStats:
    """Open a sink and run it (see :class:`ArchiveSink`)."""
    sink = ArchiveSink(settings, connection, stop_event=stop_event, on_commit=on_commit)
    sink.open()
    return sink.run(until_caught_up=until_caught_up)
