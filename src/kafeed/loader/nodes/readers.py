"""The one place readers are made for a source.

A reader hands out one source's records in a deterministic order and tracks, per shard,
what is in flight and what was delivered: that is its state (kafeed.loader.state.checkpoint). There is
one reader, :class:`kafeed.loader.nodes.reader.ShardReader`, over any source
(kafeed.loader.sources.source): Kafka partitions with their cold tier, archive tables alone, or local
files. To add a source, make its reader here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafeed.loader.settings import LoaderSettings
from kafeed.loader.workers.parent import ParentWatch

if TYPE_CHECKING:
    from kafeed.kafka import KafkaClients
    from kafeed.loader.nodes.reader import ShardReader

def kafka_reader(settings: LoaderSettings, *, index: int, count: int, client_stats: bool = False,
                 parent: ParentWatch | None = None, clients: KafkaClients | None = None) -> ShardReader:
    """Reader ``index`` of ``count`` over the Kafka topics of ``settings`` (``clients``: a
    :class:`kafeed.kafka.FakeKafka` in unit tests)."""
    from kafeed.loader.nodes.reader import ShardReader
    from kafeed.loader.sources.kafka_source import KafkaSource

    source = KafkaSource(settings, index=index, count=count, client_stats=client_stats, parent=parent,
                         clients=clients)
    return ShardReader(settings, source, index=index, count=count)


def file_reader(settings: LoaderSettings, *, index: int, count: int,
                parent: ParentWatch | None = None) -> ShardReader:
    """Reader ``index`` of ``count`` over the local files of ``settings.files``."""
    from kafeed.loader.nodes.reader import ShardReader
    from kafeed.loader.sources.file_source import FileSource

    source = FileSource(settings, index=index, count=count, parent=parent)
    return ShardReader(settings, source, index=index, count=count)


def table_reader(settings: LoaderSettings, *, index: int, count: int,
                 parent: ParentWatch | None = None) -> ShardReader:
    """Reader ``index`` of ``count`` over the archive tables of ``settings`` alone."""
    from kafeed.loader.nodes.reader import ShardReader
    from kafeed.loader.sources.table_source import TableSource

    source = TableSource(settings, index=index, count=count, parent=parent)
    return ShardReader(settings, source, index=index, count=count)


def make_reader(settings: LoaderSettings, *, index: int, count: int, client_stats: bool,
                parent: ParentWatch | None) -> ShardReader:
    """Reader ``index`` of ``count`` for the source ``settings`` name."""
    if settings.files:
        return file_reader(settings, index=index, count=count, parent=parent)
    if settings.archive_only:
        return table_reader(settings, index=index, count=count, parent=parent)
    return kafka_reader(settings, index=index, count=count, client_stats=client_stats, parent=parent)
