"""What the reader needs of a source of records: its shards, and their queues filled.

A source holds *shards* (a Kafka partition, a file), each a run of records at increasing
positions (an offset, a row), with gaps where a source has them (Kafka's transaction
markers). The one reader (kafeed.loader.nodes.reader.ShardReader) hands their records out in a
deterministic order and keeps what the state needs; the source decides which shards the
reader owns and where each starts, and fills each shard's queue
(:class:`kafeed.loader.sources.partition.Partition`) with entries in position order, each with how
it decodes (``Partition.decode``, by the record kind: kafeed.loader.nodes.record_kinds).

Three sources implement it:

- Kafka partitions (kafeed.loader.sources.kafka_source): librdkafka's fetcher pushes records, paused
  and resumed under the read-ahead policy (kafeed.loader.sources.read_ahead); in a consumer group,
  shards come and go with the group's assignments. Below a partition's log start, its
  queue is filled from the topic's Iceberg table (kafeed.loader.sources.cold_tier), as the same
  entries, so the order and the state do not depend on the tier.
- archived topics read from their Iceberg tables alone, never the cluster
  (kafeed.loader.sources.table_source, ``archive_only=True``), under the same keys and offsets;
- local Parquet/Arrow files (kafeed.loader.sources.file_source): a chunk (a row group) at a time,
  pulled by row.

A source's records are handed out *interleaved* (one per shard in turn: Kafka, whose shards
all grow at once) or *in turn* (each shard to its end, then the next: files, of which one
is open at a time). To add a source: implement :class:`Source` in a module of its own, and
make its reader in kafeed.loader.nodes.readers.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from kafeed.loader.sources.partition import Partition, Ref
from kafeed.loader.state.resume import PartitionStart


class Shards(Protocol):
    """What a source may use of its reader: the shards, to add to and fill, and what a
    resume loaded (kafeed.loader.nodes.reader)."""

    parts: list[Partition]  # the reader's shards, sorted by key; the order's
    known: dict[str, int]  # per source name, the highest shard the loaded state names
    # Per shard key, where it starts (empty: a fresh reader).
    starts: dict[str, PartitionStart]

    def restore(self, ref: Ref, payload: Any) -> None:
        """An in-flight record of an exact resume, re-read (its payload; None: bad now)."""
        ...

    def add(self, part: Partition) -> None:
        """Take ``part`` into the order."""
        ...

    def remove(self, keys: list[str]) -> None:
        """Drop shards from the order (Kafka partitions revoked)."""
        ...


class Source(Protocol):
    """A source of records for one reader (see the module docstring)."""

    interleaved: bool  # records handed out one per shard in turn, else each shard to its end
    check_s: float  # how often top_up() is due (inf: never)

    @property
    def assigned(self) -> bool:
        """Whether it knows its shards (a consumer group's come in a callback)."""
        ...

    @property
    def opened(self) -> bool:
        ...

    def open(self, shards: Shards) -> None:
        """Add the reader's shards (``shards.add``), now or as they are assigned, each from
        where ``shards.starts`` says, and re-read the in-flight records of an exact resume
        (``shards.restore``)."""
        ...

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        """Queue records, waiting up to ``wait`` for some; ``turn``: the shard whose turn
        found its queue empty. Returns how many records were queued (or restored)."""
        ...

    def wake(self, part: Partition) -> None:
        """``part``'s turn found its queue empty while it was paused (``Partition.paused``)."""
        ...

    def taken(self, nbytes: int) -> None:
        """A queued record was taken (its entry's bytes): once per record, for a source with
        a read-ahead to keep (``check_s`` finite; never called otherwise)."""
        ...

    def top_up(self, now: float) -> None:
        """Every ``check_s`` while records are taken (never when it is infinite)."""
        ...

    def check_decoded(self) -> None:
        """At the end of a bounded run: raise SchemaError for a topic none of whose records
        decoded (kafeed.loader.nodes.decode)."""
        ...

    def stop_on(self, stop: threading.Event) -> None:
        """Waits for records raise kafeed.loader.workers.prefetch.Stopped once ``stop`` is set."""
        ...

    def close(self) -> None:
        ...
