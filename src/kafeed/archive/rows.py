"""Records to table rows and back: a pure batch function, no Kafka and no catalog.

:class:`RowMapper` turns a batch of records into one Arrow table in the archive schema
(kafeed.archive.schema), sorted by (partition, offset); :func:`record_value` gives back
the exact bytes of an archived record, which is what a replay produces and what the
loader decodes when it reads the cold tier. A record that does not decode as the table's
record type is kept whole (kind ``raw``, its bytes in ``value``): the archive never drops
a record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kafeed.archive.schema import Kind, arrow_schema
from kafeed.errors import SchemaError
from kafeed.schema.codec import TOKEN_NUMPY_DTYPES, decode_document, decode_sample, pack_tokens
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample

if TYPE_CHECKING:
    import pyarrow as pa

Headers = tuple[tuple[str, bytes | None], ...]
_DTYPE_NAMES = {code: str(np_dtype.newbyteorder("=")) for code, np_dtype in TOKEN_NUMPY_DTYPES.items()}
_DTYPE_CODES = {name: code for code, name in _DTYPE_NAMES.items()}
KIND_NAMES: dict[str, str] = {"tokens": "TokenizedDocument", "samples": "TrainingSample", "raw": "raw"}


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """One consumed record, detached from the client's message object."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


def from_message(msg: Any) -> ArchivedRecord:
    """An :class:`ArchivedRecord` from a confluent-kafka ``Message``."""
    return ArchivedRecord(topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
                          timestamp_ms=msg.timestamp()[1], key=msg.key(), value=msg.value(),
                          headers=tuple(msg.headers() or ()))


@dataclass
class MapStats:
    """What the mapper saw: rows written, and how many were kept whole as ``raw``."""

    rows: int = 0
    decoded: int = 0
    kept_raw: int = 0
    value_bytes: int = 0


@dataclass
class _Columns:
    data: dict[str, list[Any]] = field(default_factory=dict)
    tokens: list[np.ndarray[Any, Any] | None] = field(default_factory=list)


class RowMapper:
    """Records of one record type to rows; counts in :attr:`stats`."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.stats = MapStats()
        self._schema = arrow_schema()

    def rows(self, records: Sequence[ArchivedRecord]) -> pa.Table:
        """One Arrow table in the archive schema, sorted by (partition, offset)."""
        import pyarrow as pa

        ordered = sorted(records, key=lambda r: (r.partition, r.offset))
        cols: dict[str, list[Any]] = {name: [] for name in self._schema.names if name != "tokens"}
        tokens: list[np.ndarray[Any, Any] | None] = []
        for rec in ordered:
            row = self._row(rec)
            tokens.append(row.pop("tokens", None))
            for name, column in cols.items():
                column.append(row.get(name))
        self.stats.rows += len(ordered)
        arrays = []
        for f in self._schema:
            if f.name == "tokens":
                arrays.append(_token_lists(tokens, f.type))
            elif f.name == "timestamp":
                arrays.append(pa.array(np.asarray(cols["timestamp"], dtype=np.int64) * 1000,
                                       type=pa.int64()).cast(f.type))
            else:
                arrays.append(pa.array(cols[f.name], type=f.type))
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def _row(self, rec: ArchivedRecord) -> dict[str, Any]:
        row: dict[str, Any] = {
            "topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
            "timestamp": max(rec.timestamp_ms, 0), "key": rec.key,
            "headers": [{"key": k, "value": v} for k, v in rec.headers] if rec.headers else None,
        }
        self.stats.value_bytes += len(rec.value or b"")
        decoded = self._decode(rec)
        if decoded is None:
            self.stats.kept_raw += 1
            row.update(kind="raw", value=rec.value)
            return row
        self.stats.decoded += 1
        row.update(decoded)
        return row

    def _decode(self, rec: ArchivedRecord) -> dict[str, Any] | None:
        if self.kind == "raw" or rec.value is None:
            return None
        record: TokenizedDocument | TrainingSample
        try:
            if self.kind == "tokens":
                record = decode_document(rec.value, topic=rec.topic, partition=rec.partition,
                                         offset=rec.offset)
                row = _document_row(record)
            else:
                record = decode_sample(rec.value, topic=rec.topic, partition=rec.partition, offset=rec.offset)
                row = _sample_row(record)
        except SchemaError:
            return None
        # Bytes that re-encode exactly need not be stored twice; any others are kept as they came.
        # The row holds every field of the parsed record, so re-encoding the record is re-encoding
        # the row (record_value does the latter; the unit tests check both agree).
        rebuilt = record.SerializeToString(deterministic=True)
        row["value"] = None if rebuilt == rec.value else rec.value
        return row


def _document_row(doc: TokenizedDocument) -> dict[str, Any]:
    dtype = TOKEN_NUMPY_DTYPES[doc.dtype]
    return {
        "kind": KIND_NAMES["tokens"], "id": doc.id, "source": doc.source, "event_time_ms": doc.timestamp,
        "tokens": np.frombuffer(doc.tokens, dtype=dtype), "dtype": _DTYPE_NAMES[doc.dtype],
        "num_tokens": doc.num_tokens, "tokenizer": doc.tokenizer, "input_topic": doc.input_topic,
        "input_partition": doc.input_partition, "input_offset": doc.input_offset,
        "targets": list(doc.target_values), "metadata": dict(doc.metadata),
    }


def _sample_row(sample: TrainingSample) -> dict[str, Any]:
    return {
        "kind": KIND_NAMES["samples"], "id": sample.id, "source": sample.source,
        "event_time_ms": sample.timestamp, "input_data": sample.input_data,
        "targets": list(sample.target_values), "metadata": dict(sample.metadata),
    }


def _token_lists(tokens: Sequence[np.ndarray[Any, Any] | None], list_type: Any) -> pa.Array:
    """One list<long> column from per-row token arrays, built from a flat buffer."""
    import pyarrow as pa

    sizes = np.fromiter((0 if t is None else t.size for t in tokens), dtype=np.int64, count=len(tokens))
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    present = [t for t in tokens if t is not None]
    flat = np.concatenate(present).astype(np.int64) if present else np.zeros(0, dtype=np.int64)
    mask = pa.array([t is None for t in tokens], type=pa.bool_())
    arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat), type=list_type, mask=mask)
    return arr


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
