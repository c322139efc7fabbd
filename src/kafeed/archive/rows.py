"""Records to table rows and back: a pure batch function, no Kafka and no catalog.

:class:`RecordBatch` holds consumed records column by column (one list per field, no
object per record); :class:`RowMapper` decodes what was added to a batch since the last
call (the sink calls it after every consume, while the client fetches the next records)
and turns a batch into one Arrow table in the archive schema (kafeed.archive.schema),
sorted by (partition, offset). The record-type columns are built per batch from flat
buffers (:mod:`kafeed.archive.columns`), so the only work per record is parsing it.
:func:`record_value` gives back the exact bytes of an archived record, which is what a
replay produces and what the loader decodes when it reads the cold tier. A record that
does not decode as the table's record type is kept whole (kind ``raw``, its bytes in
``value``): the archive never drops a record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kafeed.archive.columns import DECODERS, DTYPE_NAMES, KIND_NAMES, Decoded, Headers, Samples
from kafeed.archive.schema import Kind, arrow_schema
from kafeed.formats import ValueFormat
from kafeed.schema.codec import pack_tokens
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["KIND_NAMES", "Headers", "MapStats", "RecordBatch", "RowMapper", "record_headers", "record_value"]

_DTYPE_CODES = {name: code for code, name in DTYPE_NAMES.items()}


@dataclass
class RecordBatch:
    """Consumed records of one topic, one list per field (index ``i`` is one record)."""

    topic: str
    partition: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    timestamp_ms: list[int] = field(default_factory=list)
    key: list[bytes | None] = field(default_factory=list)
    value: list[bytes | None] = field(default_factory=list)
    headers: list[Headers | None] = field(default_factory=list)
    value_bytes: int = 0
    #: The record-type columns of the records decoded so far (see RowMapper.decode).
    decoded: Decoded | None = None

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, partition: int, offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None,
            headers: Headers | None = None) -> None:
        self.partition.append(partition)
        self.offset.append(offset)
        self.timestamp_ms.append(timestamp_ms)
        self.key.append(key)
        self.value.append(value)
        self.headers.append(headers or None)
        if value is not None:
            self.value_bytes += len(value)

    def add_message(self, msg: Any) -> None:
        """Add a confluent-kafka ``Message`` (not an error)."""
        value = msg.value()
        self.partition.append(msg.partition())
        self.offset.append(msg.offset())
        self.timestamp_ms.append(msg.timestamp()[1])
        self.key.append(msg.key())
        self.value.append(value)
        self.headers.append(msg.headers())
        if value is not None:
            self.value_bytes += len(value)

    def ranges(self) -> dict[int, tuple[int, int]]:
        """Per partition: (first offset, last offset + 1) of its records."""
        partitions = set(self.partition)
        if len(partitions) == 1:  # the sink keeps one batch per partition
            return {partitions.pop(): (min(self.offset), max(self.offset) + 1)}
        parts = np.asarray(self.partition, dtype=np.int64)
        offsets = np.asarray(self.offset, dtype=np.int64)
        out: dict[int, tuple[int, int]] = {}
        for p in sorted(partitions):
            mine = offsets[parts == p]
            out[p] = (int(mine.min()), int(mine.max()) + 1)
        return out


@dataclass
class MapStats:
    """What the mapper saw: rows written, and how many were kept whole as ``raw``."""

    rows: int = 0
    decoded: int = 0
    kept_raw: int = 0
    value_bytes: int = 0


class RowMapper:
    """Batches of one record type to rows; counts in :attr:`stats`."""

    def __init__(self, kind: Kind, value_format: ValueFormat | None = None) -> None:
        self.kind = kind
        # Samples of a topic another producer wrote: decoded by its format (kafeed.formats).
        self.value_format = None if value_format is None or value_format.name == "kafeed" else value_format
        self.stats = MapStats()
        self._schema = arrow_schema()

    def decode(self, batch: RecordBatch) -> Decoded:
        """Decode the records added to ``batch`` since the last call; the batch's columns so far."""
        decoded = batch.decoded
        if decoded is None:
            decoded = batch.decoded = DECODERS[self.kind]()
        done = len(decoded.kind)
        if done < len(batch):
            if self.value_format is not None and isinstance(decoded, Samples):
                decoded.decode_as(self.value_format, batch.topic, list(zip(
                    batch.partition[done:], batch.offset[done:], batch.timestamp_ms[done:],
                    batch.value[done:], batch.headers[done:], strict=True)))
            else:
                decoded.decode(batch.value[done:])
        return decoded

    def rows(self, batch: RecordBatch) -> pa.Table:
        """One Arrow table in the archive schema, sorted by (partition, offset)."""
        import pyarrow as pa

        decoded = self.decode(batch)
        n = len(batch)
        parts = np.asarray(batch.partition, dtype=np.int32)
        offsets = np.asarray(batch.offset, dtype=np.int64)
        stamps = np.maximum(np.asarray(batch.timestamp_ms, dtype=np.int64), 0) * 1000
        types = {f.name: f.type for f in self._schema}
        columns: dict[str, pa.Array] = {
            "topic": pa.repeat(pa.scalar(batch.topic, types["topic"]), n),
            "partition": pa.array(parts, type=pa.int32()),
            "offset": pa.array(offsets, type=pa.int64()),
            "timestamp": pa.array(stamps, type=pa.int64()).cast(types["timestamp"]),
            "key": pa.array(batch.key, type=types["key"]),
            "headers": _headers(batch.headers, types["headers"]),
            **decoded.arrays(types),
        }
        self.stats.rows += n
        self.stats.decoded += decoded.count
        self.stats.kept_raw += n - decoded.count
        self.stats.value_bytes += batch.value_bytes
        arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in self._schema]
        table = pa.Table.from_arrays(arrays, schema=self._schema)
        # Records of one partition arrive in offset order; only a batch mixed by hand needs sorting.
        if n > 1 and not (np.all(parts[1:] >= parts[:-1])
                          and np.all((parts[1:] > parts[:-1]) | (offsets[1:] > offsets[:-1]))):
            table = table.take(pa.array(np.lexsort((offsets, parts))))
        return table


def _headers(headers: list[Headers | None], list_type: Any) -> pa.Array:
    import pyarrow as pa

    if not any(headers):
        return pa.nulls(len(headers), list_type)
    return pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in headers], type=list_type)


def _message(row: Mapping[str, Any]) -> TokenizedDocument | TrainingSample:
    """The protobuf record a decoded row stands for."""
    metadata = row.get("metadata") or {}
    if isinstance(metadata, list):  # Arrow gives maps back as (key, value) pairs
        metadata = dict(metadata)
    if row["kind"] == KIND_NAMES["tokens"]:
        code = _DTYPE_CODES[row["dtype"]]
        doc = TokenizedDocument(
            id=row["id"], source=row["source"], tokens=pack_tokens(np.asarray(row["tokens"]), code),
            dtype=code, num_tokens=row["num_tokens"], tokenizer=row["tokenizer"],  # type: ignore[arg-type]
            input_topic=row["input_topic"], input_partition=row["input_partition"],
            input_offset=row["input_offset"], timestamp=row["event_time_ms"])
        doc.target_values.extend(row.get("targets") or ())
        doc.metadata.update(metadata)
        return doc
    sample = TrainingSample(input_data=row["input_data"], id=row["id"], source=row["source"],
                            timestamp=row["event_time_ms"])
    sample.target_values.extend(row.get("targets") or ())
    sample.metadata.update(metadata)
    return sample


def record_value(row: Mapping[str, Any]) -> bytes | None:
    """The exact bytes of the archived record ``row`` (a dict of the table's columns)."""
    if row["kind"] == KIND_NAMES["raw"] or row.get("value") is not None:
        value: bytes | None = row.get("value")
        return value
    return _message(row).SerializeToString(deterministic=True)


def record_headers(row: Mapping[str, Any]) -> Headers:
    """The archived record's headers as the producer takes them."""
    return tuple((h["key"], h["value"]) for h in row.get("headers") or ())
