"""One consumed batch, kept as the client's messages and read a column at a time.

The core hands every stage a :class:`RecordBatch`. It is a ``Sequence[Record]``: a
stage that iterates gets :class:`~kafeed.stream.records.Record` tuples, built all
together on first use. A stage that works on columns (route) reads :meth:`~RecordBatch.keys`,
:meth:`~RecordBatch.values` and :meth:`~RecordBatch.headers` instead, each one list made
by calling the message's accessor from C (``map``), so no Python object is built per
record and no bytecode runs per record; the core takes the batch's input positions
(:meth:`~RecordBatch.positions`) the same way, with numpy.

A batch can also wrap ``Record`` s (:meth:`RecordBatch.of`), so a stage's batch function
runs on plain records in tests and in other callers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter, methodcaller
from typing import Any, overload

import numpy as np

from kafeed.stream.records import Record, positions

#: A record's headers as a column holds them: the client's list (or None), or a Record's tuple.
HeaderList = Sequence[tuple[str, bytes | None]] | None

_FIELD = {name: itemgetter(i) for i, name in enumerate(Record._fields)}


def message_column(messages: Sequence[Any], accessor: str) -> list[Any]:
    """``[m.<accessor>() for m in messages]``, the calls made from C.

    Through the client's own method when the messages are its ``Message`` s (several
    times faster than ``methodcaller``), else by name (the fakes of unit tests).
    """
    from kafeed.kafka.types import Message

    if messages and type(messages[0]) is Message:
        return list(map(getattr(Message, accessor), messages))
    return list(map(methodcaller(accessor), messages))


def _record(m: Any) -> Record:
    return tuple.__new__(Record, (m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                                  tuple(m.headers() or ()), m.timestamp()[1]))


class RecordBatch(Sequence[Record]):
    """The records of one batch in consume order, as messages or as Record tuples."""

    __slots__ = ("_headers", "_keys", "_messages", "_records", "_topic", "_values")

    def __init__(self, messages: list[Any], *, topic: str | None = None,
                 values: list[bytes | None] | None = None) -> None:
        """``messages``: the client's messages (no errors among them); ``topic``: all are from it
        (None: from one or more topics); ``values``: their values, when the caller read them already."""
        self._messages: list[Any] | None = messages
        self._records: list[Record] | None = None
        self._topic = topic
        self._values = values
        self._keys: list[bytes | None] | None = None
        self._headers: list[HeaderList] | None = None

    @classmethod
    def of(cls, records: Sequence[Record]) -> RecordBatch:
        """``records`` as a batch (itself when it is one already)."""
        if isinstance(records, RecordBatch):
            return records
        batch = cls([])
        batch._messages = None
        batch._records = list(records)
        return batch

    def __len__(self) -> int:
        return len(self._messages) if self._messages is not None else len(self.records)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...

    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if self._records is None and isinstance(i, int):
            assert self._messages is not None  # one of the two is always set
            return _record(self._messages[i])  # one record: no need to build them all
        return self.records[i]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    @property
    def records(self) -> list[Record]:
        """Every record as a :class:`Record`, built on first use."""
        if self._records is None:
            assert self._messages is not None
            self._records = list(map(_record, self._messages))
        return self._records

    def _column(self, accessor: str) -> list[Any]:
        if self._messages is not None:
            return message_column(self._messages, accessor)
        return list(map(_FIELD[accessor], self.records))

    def keys(self) -> list[bytes | None]:
        if self._keys is None:
            self._keys = self._column("key")
        return self._keys

    def values(self) -> list[bytes | None]:
        if self._values is None:
            self._values = self._column("value")
        return self._values

    def headers(self) -> list[HeaderList]:
        """Each record's headers: None or empty when it has none."""
        if self._headers is None:
            self._headers = self._column("headers")
        return self._headers

    def topics(self) -> list[str]:
        """Each record's topic (all the same when the batch was made with ``topic``)."""
        if self._topic is not None:
            return [self._topic] * len(self)
        return self._column("topic")

    def positions(self) -> dict[tuple[str, int], int]:
        """Per (topic, partition) the next offset to read: last processed offset + 1."""
        if self._messages is None:
            return positions(self.records)
        if not self._messages:
            return {}
        parts = np.array(message_column(self._messages, "partition"), dtype=np.int64)
        offsets = np.array(message_column(self._messages, "offset"), dtype=np.int64)
        if self._topic is not None:
            names, codes = [self._topic], np.zeros(len(parts), dtype=np.int64)
        else:  # several input topics: number them, then one table of (topic, partition) slots
            topics = np.asarray(message_column(self._messages, "topic"))
            found, inverse = np.unique(topics, return_inverse=True)
            names, codes = found.tolist(), inverse.astype(np.int64).ravel()
        width = int(parts.max()) + 1
        top = np.full(len(names) * width, -1, dtype=np.int64)
        np.maximum.at(top, codes * width + parts, offsets)
        return {(names[slot // width], slot % width): int(top[slot]) + 1
                for slot in np.flatnonzero(top >= 0).tolist()}

