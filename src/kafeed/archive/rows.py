"""Records to table rows and back: a pure batch function, no Kafka and no catalog.

:class:`RecordBatch` holds consumed records column by column (one list per field, no
object per record); :class:`RowMapper` decodes what was added to a batch since the last
call (the sink calls it after every consume, while the client fetches the next records)
and turns a batch into one Arrow table in the archive schema (kafeed.archive.schema),
sorted by (partition, offset). The columns are built per batch from flat buffers: the
token ids of every document are joined into one buffer and viewed with numpy, and the
list and map columns are made from offsets, so the only work per record is parsing it.
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
from google.protobuf.message import DecodeError

from kafeed.archive.schema import Kind, arrow_schema
from kafeed.schema.codec import TOKEN_NUMPY_DTYPES, pack_tokens
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample

if TYPE_CHECKING:
    import pyarrow as pa

Headers = tuple[tuple[str, bytes | None], ...]
_DTYPE_NAMES = {code: str(np_dtype.newbyteorder("=")) for code, np_dtype in TOKEN_NUMPY_DTYPES.items()}
_DTYPE_CODES = {name: code for code, name in _DTYPE_NAMES.items()}
_ITEMSIZES = {code: np_dtype.itemsize for code, np_dtype in TOKEN_NUMPY_DTYPES.items()}
KIND_NAMES: dict[str, str] = {"tokens": "TokenizedDocument", "samples": "TrainingSample", "raw": "raw"}
_DOCUMENT = KIND_NAMES["tokens"]


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
    decoded: _Decoded | None = None

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

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.stats = MapStats()
        self._schema = arrow_schema()

    def decode(self, batch: RecordBatch) -> _Decoded:
        """Decode the records added to ``batch`` since the last call; the batch's columns so far."""
        decoded = batch.decoded
        if decoded is None:
            decoded = batch.decoded = _BUILDERS[self.kind]()
        done = len(decoded.kind)
        if done < len(batch):
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


def _lists(sizes: list[int], flat: pa.Array, present: list[bool], list_type: Any) -> pa.Array:
    """A large_list column from per-row sizes and the rows' elements end to end."""
    import pyarrow as pa

    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(np.asarray(sizes, dtype=np.int64), out=offsets[1:])
    mask = pa.array(np.logical_not(np.asarray(present, dtype=bool)))
    return pa.LargeListArray.from_arrays(pa.array(offsets), flat, type=list_type, mask=mask)


class _Decoded:
    """The record-type columns of one batch, built row by row in lists, then as Arrow arrays.

    A row that does not decode is kept whole: kind ``raw``, its bytes in ``value``, every
    decoded column null."""

    def __init__(self) -> None:
        self.count = 0
        self.kind: list[str] = []
        self.stored: list[bytes | None] = []  # the value column
        self.present: list[bool] = []
        self.id: list[str | None] = []
        self.source: list[str | None] = []
        self.event_time: list[int | None] = []
        self.target_sizes: list[int] = []
        self.targets: list[float] = []
        self.meta_sizes: list[int] = []
        self.meta_keys: list[str] = []
        self.meta_values: list[str] = []

    def raw(self, value: bytes | None) -> None:
        self.kind.append(KIND_NAMES["raw"])
        self.stored.append(value)
        self.present.append(False)
        self.id.append(None)
        self.source.append(None)
        self.event_time.append(None)
        self.target_sizes.append(0)
        self.meta_sizes.append(0)

    def decode(self, values: list[bytes | None]) -> None:
        raise NotImplementedError

    def common(self, record: TokenizedDocument | TrainingSample, value: bytes, kind: str) -> None:
        """The fields both record types have; ``value`` is stored only if re-encoding differs."""
        self.count += 1
        self.kind.append(kind)
        # The row holds every field of the parsed record, so re-encoding the record is re-encoding
        # the row (record_value does the latter; the unit tests check both agree). Bytes that
        # re-encode exactly need not be stored twice; any others are kept as they came.
        self.stored.append(None if record.SerializeToString(deterministic=True) == value else value)
        self.present.append(True)
        self.id.append(record.id)
        self.source.append(record.source)
        self.event_time.append(record.timestamp)
        targets = record.target_values
        self.target_sizes.append(len(targets))
        if targets:
            self.targets.extend(targets)
        metadata = record.metadata
        self.meta_sizes.append(len(metadata))
        if metadata:
            for k, v in metadata.items():
                self.meta_keys.append(k)
                self.meta_values.append(v)

    def arrays(self, types: Mapping[str, Any]) -> dict[str, pa.Array]:
        import pyarrow as pa

        meta_offsets = np.zeros(len(self.meta_sizes) + 1, dtype=np.int32)
        np.cumsum(np.asarray(self.meta_sizes, dtype=np.int32), out=meta_offsets[1:])
        metadata_type = types["metadata"]
        absent = pa.array(np.logical_not(np.asarray(self.present, dtype=bool)))
        return {
            "kind": pa.array(self.kind, type=types["kind"]),
            "value": pa.array(self.stored, type=types["value"]),
            "id": pa.array(self.id, type=types["id"]),
            "source": pa.array(self.source, type=types["source"]),
            "event_time_ms": pa.array(self.event_time, type=pa.int64()),
            "targets": _lists(self.target_sizes, pa.array(self.targets, type=pa.float32()), self.present,
                              types["targets"]),
            "metadata": pa.MapArray.from_arrays(
                pa.array(meta_offsets), pa.array(self.meta_keys, type=metadata_type.key_type),
                pa.array(self.meta_values, type=metadata_type.item_type), type=metadata_type, mask=absent),
        }


class _Raw(_Decoded):
    def decode(self, values: list[bytes | None]) -> None:
        for value in values:
            self.raw(value)


class _Samples(_Decoded):
    def __init__(self) -> None:
        super().__init__()
        self.input_data: list[bytes | None] = []

    def decode(self, values: list[bytes | None]) -> None:
        sample = TrainingSample()
        kind = KIND_NAMES["samples"]
        for value in values:
            if value is not None:
                try:
                    sample.ParseFromString(value)
                except DecodeError:
                    pass
                else:
                    self.common(sample, value, kind)
                    self.input_data.append(sample.input_data)
                    continue
            self.raw(value)
            self.input_data.append(None)

    def arrays(self, types: Mapping[str, Any]) -> dict[str, pa.Array]:
        import pyarrow as pa

        return super().arrays(types) | {"input_data": pa.array(self.input_data, type=types["input_data"])}


class _Documents(_Decoded):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[bytes] = []
        self.codes: list[int] = []
        self.num_tokens: list[int | None] = []
        self.tokenizer: list[str | None] = []
        self.input_topic: list[str | None] = []
        self.input_partition: list[int | None] = []
        self.input_offset: list[int | None] = []

    def decode(self, values: list[bytes | None]) -> None:
        doc = TokenizedDocument()
        itemsizes = _ITEMSIZES
        common = self.common
        tokens_, codes, counts = self.tokens.append, self.codes.append, self.num_tokens.append
        tokenizer, in_topic = self.tokenizer.append, self.input_topic.append
        in_partition, in_offset = self.input_partition.append, self.input_offset.append
        for value in values:
            if value is not None:
                try:
                    doc.ParseFromString(value)
                except DecodeError:
                    pass
                else:
                    tokens = doc.tokens
                    code = doc.dtype
                    size = itemsizes.get(code)
                    count = doc.num_tokens
                    # A payload that disagrees with its count is not a document (as decode_document says).
                    if size is not None and len(tokens) == count * size:
                        common(doc, value, _DOCUMENT)
                        tokens_(tokens)
                        codes(code)
                        counts(count)
                        tokenizer(doc.tokenizer)
                        in_topic(doc.input_topic)
                        in_partition(doc.input_partition)
                        in_offset(doc.input_offset)
                        continue
            self.raw(value)
            self.tokens.append(b"")
            self.codes.append(-1)
            self.num_tokens.append(None)
            self.tokenizer.append(None)
            self.input_topic.append(None)
            self.input_partition.append(None)
            self.input_offset.append(None)

    def _flat_tokens(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Every document's token ids end to end, as int64: one join and one view when the batch
        has one dtype (the usual case), else one view per document."""
        codes = {c for c in self.codes if c >= 0}
        if len(codes) == 1:
            joined = np.frombuffer(b"".join(self.tokens), dtype=TOKEN_NUMPY_DTYPES[codes.pop()])
            return joined.astype(np.int64)
        parts = [np.frombuffer(t, dtype=TOKEN_NUMPY_DTYPES[c])
                 for t, c in zip(self.tokens, self.codes, strict=True) if c >= 0]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def arrays(self, types: Mapping[str, Any]) -> dict[str, pa.Array]:
        import pyarrow as pa

        sizes = [n or 0 for n in self.num_tokens]
        flat = pa.array(self._flat_tokens(), type=pa.int64())
        return super().arrays(types) | {
            "tokens": _lists(sizes, flat, self.present, types["tokens"]),
            "dtype": pa.array([_DTYPE_NAMES.get(c) for c in self.codes], type=types["dtype"]),
            "num_tokens": pa.array(self.num_tokens, type=pa.int32()),
            "tokenizer": pa.array(self.tokenizer, type=types["tokenizer"]),
            "input_topic": pa.array(self.input_topic, type=types["input_topic"]),
            "input_partition": pa.array(self.input_partition, type=pa.int32()),
            "input_offset": pa.array(self.input_offset, type=pa.int64()),
        }


_BUILDERS: dict[str, type[_Decoded]] = {"tokens": _Documents, "samples": _Samples, "raw": _Raw}


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
