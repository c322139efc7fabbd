"""One partition of a reader: its queue of fetched records and what the state needs of it.

A queued record is an *entry*, an exact tuple ``(offset, data, timestamp_ms, nbytes,
extra)``: for a Kafka record its value, the bytes it holds in librdkafka's fetch and its key;
for a record of the archive's cold tier its decoded payload, 0 bytes, and the table record
itself when that payload is still to be decoded from its bytes (kafeed.loader.sources.cold_tier).
Tuples of plain values, not librdkafka's ``Message`` objects: the cyclic collector tracks a
``Message``, and the thousands that wait in the queues were promoted into its oldest
generation, one full collection of the whole process per ~100M tokens read; it untracks such
a tuple at its first pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

# (offset, data, timestamp_ms, nbytes, extra): see the module docstring
Entry: TypeAlias = tuple[int, Any, int, int, Any]
Ref: TypeAlias = tuple[str, int]  # a record: its shard's key, its position
# What a reader hands out: the record, its payload, the tokens of it emitted before a resume.
Item: TypeAlias = tuple[Ref, Any, int]


def _by_source(entry: Entry) -> Any:
    raise RuntimeError("this partition's records come decoded from its source")


@dataclass
class Partition:
    """Positions (``read``, in flight, delivered out of order), the queue of fetched
    records (entries, see the module docstring) and how they decode, and whether it is cold
    (read from the archive table below ``cold_until``)."""

    key: str
    topic: str
    partition: int
    read: int
    end: int | None
    delivered: set[int]
    partial: dict[int, int]
    restore: set[int]
    in_flight: set[int] = field(default_factory=set)
    stamps: dict[int, int] = field(default_factory=dict)  # in-flight offset -> Kafka timestamp (ms)
    done: list[int] = field(default_factory=list)  # timestamps of records delivered since the drain
    queue: deque[Entry] = field(default_factory=deque)
    fetch_done: bool = False
    eof: bool = False
    paused: bool = False
    seek: int = 0
    cold_until: int | None = None  # cold: offsets below this are read from the archive table
    cold_pos: int = 0  # the next offset to read from the table
    # An entry of the queue -> its payload (None: bad). The queue holds the records of one tier
    # at a time, Kafka's or the archive table's (kafeed.loader.sources.cold_tier), each with its decode.
    decode: Callable[[Entry], Any] = _by_source

    def queued_to(self) -> int:
        """The offset past the last record queued, or ``read`` when none is."""
        return self.queue[-1][0] + 1 if self.queue else self.read

    def next_offset(self) -> int:
        return min(self.in_flight) if self.in_flight else self.read

    def prune(self) -> None:
        nxt = self.next_offset()
        self.delivered = {o for o in self.delivered if o >= nxt}

    def entry(self) -> dict[str, Any]:
        nxt = self.next_offset()  # once: with records cut ahead (a mixture) many are in flight
        if self.delivered:
            self.delivered = {o for o in self.delivered if o >= nxt}
        out: dict[str, Any] = {"next": nxt, "read": self.read, "end": self.end,
                               "delivered": sorted(self.delivered)}
        if self.partial:  # kept until delivered: a save before they come round must pass them on
            self.partial = {o: e for o, e in self.partial.items() if o >= nxt and o not in self.delivered}
            if self.partial:
                out["partial"] = [[o, self.partial[o]] for o in sorted(self.partial)]
        return out
