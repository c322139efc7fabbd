"""What a stream needs of a reader, and the one place readers are made for a source.

A reader hands out one source's records in a deterministic order and tracks, per shard,
what is in flight and what was delivered: that is its state (kafeed.loader.state). Two
readers exist: :class:`kafeed.loader.reader.KafkaReader` over Kafka partitions (with its
cold tier) and :class:`kafeed.loader.file_reader.PositionReader` over a source read by
position (kafeed.loader.source). To add a source, make its reader here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kafeed.loader.parent import ParentWatch
from kafeed.loader.partition import Partition
from kafeed.loader.settings import LoaderSettings

Ref = tuple[str, int]
Item = tuple[Ref, Any, int]  # (shard key, position), payload, tokens already emitted
STATE_VERSION = 1  # of a reader's state, whichever its source
STATE_KEYS = ("version", "partitions", "rr", "stats")


class Reader(Protocol):
    """The reader interface the streams (kafeed.loader.stream) use."""

    index: int
    known: dict[str, int]
    parts: list[Partition]
    stats: dict[str, int]

    def open(self) -> None: ...
    def close(self) -> None: ...
    def stop_on(self, stop: threading.Event) -> None: ...
    @property
    def exhausted(self) -> bool: ...
    def check_decoded(self) -> None: ...
    def take(self, wait: float | None = None) -> Item | None: ...
    def delivered(self, ref: Ref, *, handed_out: bool = True) -> None: ...
    def delivered_many(self, refs: list[Ref]) -> None: ...
    def drain_delivered(self) -> tuple[dict[str, int], list[int]]: ...
    def restored(self) -> dict[Ref, Any]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any], *, in_flight: Iterable[Ref] = ()) -> None: ...
    def load_plan(self, plan: Mapping[str, Mapping[str, Any]]) -> None: ...


def make_reader(settings: LoaderSettings, *, index: int, count: int, client_stats: bool,
                parent: ParentWatch | None) -> Reader:
    """Reader ``index`` of ``count`` for the source ``settings`` name."""
    if settings.files:
        from kafeed.loader.file_reader import PositionReader
        from kafeed.loader.file_source import FileSource

        return PositionReader(settings, FileSource(settings), index=index, count=count, parent=parent)
    from kafeed.loader.reader import KafkaReader

    return KafkaReader(settings, index=index, count=count, client_stats=client_stats, parent=parent)
