"""What a reader needs of a source of records that it pulls by position.

A source holds *shards* (a file, a table's Kafka partition), each a run of records at
positions ``first .. end - 1``. A reader opens it, asks each shard's extent, and reads
records a chunk at a time from any position, so a resume goes back exactly to a record in
the middle of a shard. Positions are what the loader state saves, under the key
``"<source name>:<shard>"`` (kafeed.loader.state), as for a Kafka partition.

Local Parquet/Arrow files implement it (kafeed.loader.file_source). Kafka partitions are
pushed by librdkafka's fetcher, not pulled, and are read by kafeed.loader.reader under the
read-ahead policy (kafeed.loader.read_ahead); their offsets have gaps (transaction markers),
where a shard's positions here are dense. A topic's Iceberg cold tier
(kafeed.loader.archive_source) is read for that reader, by ranges of offsets of several
partitions in one scan, into the same partition queues and as the same entries as Kafka's
records (kafeed.loader.partition).

To add a source: implement :class:`Source` in a module of its own, and name it where
readers are made (kafeed.loader.readers.make_reader).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Chunk:
    """Records ``first .. first + len(payloads) - 1`` of one shard, decoded by their record
    kind (kafeed.loader.record_kinds); ``None`` for a record that is not of that kind."""

    first: int
    payloads: list[Any]

    @property
    def stop(self) -> int:
        return self.first + len(self.payloads)


class Source(Protocol):
    """A source of records read by position (see the module docstring)."""

    name: str

    def open(self) -> list[int]:
        """Open the source; returns every shard number, sorted."""
        ...

    def extent(self, shard: int) -> tuple[int, int]:
        """The first position of ``shard`` and the one past its last record."""
        ...

    def read(self, shard: int, first: int, most: int) -> Chunk:
        """Up to ``most`` records of ``shard`` from position ``first`` (at least one when
        ``first`` lies before the shard's end; the source may return fewer, as its storage
        is laid out)."""
        ...

    def close(self) -> None:
        ...
