"""Avro as a second raw value format, and :func:`decode_raw` that reads either.

The Avro record mirrors ``TrainingSample`` field for field (see
:data:`TRAINING_SAMPLE_AVRO`) and is written *schemaless* (fastavro's
``schemaless_writer``): the value carries no schema and no magic byte.

Detection uses a Kafka record header, not a prefix byte, so the value stays a
plain Avro body that any Avro reader with the schema can decode:

- header ``kafeed.format`` = ``b"avro"``     → the value is the Avro record;
- header ``kafeed.format`` = ``b"protobuf"`` or no such header → Protobuf
  ``TrainingSample`` (records written before Avro existed have no header);
- any other header value → :class:`SchemaError`.

``kafeed ingest --format avro`` sets the header on every record it writes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro

from kafeed.choices import RawFormat
from kafeed.errors import SchemaError
from kafeed.schema.codec import decode_sample
from kafeed.schema.records_pb2 import TrainingSample

FORMAT_HEADER = "kafeed.format"

TRAINING_SAMPLE_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "TrainingSample",
    "namespace": "kafeed.v1",
    "doc": "A raw training record; mirrors the Protobuf kafeed.v1.TrainingSample.",
    "fields": [
        {"name": "input_data", "type": "bytes", "default": ""},
        {"name": "target_values", "type": {"type": "array", "items": "float"}, "default": []},
        {"name": "metadata", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "timestamp", "type": "long", "default": 0},
        {"name": "id", "type": "string", "default": ""},
        {"name": "source", "type": "string", "default": ""},
    ],
}

_PARSED = fastavro.parse_schema(TRAINING_SAMPLE_AVRO)

Headers = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None


def encode_avro(sample: TrainingSample) -> bytes:
    """Schemaless Avro body of ``sample`` (no schema, no magic byte)."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, {
        "input_data": sample.input_data,
        "target_values": list(sample.target_values),
        "metadata": dict(sample.metadata),
        "timestamp": sample.timestamp,
        "id": sample.id,
        "source": sample.source,
    })
    return buf.getvalue()


def _where(topic: str | None, partition: int | None, offset: int | None) -> str:
    if topic is None:
        return "record"
    return f"record {topic}/{partition}@{offset}"


def decode_avro(
    value: bytes | None, *, topic: str | None = None, partition: int | None = None,
    offset: int | None = None,
) -> TrainingSample:
    """Parse a schemaless Avro ``TrainingSample``; :class:`SchemaError` names the record."""
    where = _where(topic, partition, offset)
    if value is None:
        raise SchemaError(f"{where} has no value (tombstone).")
    buf = io.BytesIO(value)
    try:
        rec = fastavro.schemaless_reader(buf, _PARSED, None)
    except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, ...
        raise SchemaError(f"{where} is not an Avro TrainingSample: {exc!r}.") from exc
    if buf.tell() != len(value):
        raise SchemaError(
            f"{where} is not an Avro TrainingSample: {len(value) - buf.tell()} trailing bytes.")
    if not isinstance(rec, dict):
        raise SchemaError(f"{where} is not an Avro TrainingSample record.")
    sample = TrainingSample(
        input_data=rec["input_data"], timestamp=rec["timestamp"], id=rec["id"], source=rec["source"],
    )
    sample.target_values.extend(rec["target_values"])
    sample.metadata.update(rec["metadata"])
    return sample


def header_value(headers: Headers, key: str) -> bytes | None:
    """The last value of header ``key`` (as bytes), or None; accepts list or dict headers."""
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: bytes | None = None
    for k, v in items:
        if k == key:
            found = v.encode() if isinstance(v, str) else v
    return found


def raw_format_of(
    headers: Headers, *, topic: str | None = None, partition: int | None = None,
    offset: int | None = None,
) -> RawFormat:
    """Which codec a raw record uses, from its ``kafeed.format`` header (default protobuf)."""
    fmt = header_value(headers, FORMAT_HEADER)
    if fmt is None or fmt == b"protobuf":
        return "protobuf"
    if fmt == b"avro":
        return "avro"
    raise SchemaError(
        f"{_where(topic, partition, offset)} has an unknown {FORMAT_HEADER} header {fmt!r}.",
        hint="Known formats: protobuf, avro.",
    )


def format_headers(fmt: RawFormat) -> list[tuple[str, bytes]]:
    """The headers a producer attaches for ``fmt`` (none for protobuf, the default)."""
    return [(FORMAT_HEADER, b"avro")] if fmt == "avro" else []


def encode_raw(sample: TrainingSample, fmt: RawFormat) -> bytes:
    """Serialize ``sample`` in ``fmt``; pair it with :func:`format_headers`."""
    return encode_avro(sample) if fmt == "avro" else sample.SerializeToString()


def decode_raw(
    value: bytes | None, headers: Headers = None, *, topic: str | None = None,
    partition: int | None = None, offset: int | None = None,
) -> TrainingSample:
    """Decode a raw record in whichever format its headers say (Protobuf or Avro)."""
    fmt = raw_format_of(headers, topic=topic, partition=partition, offset=offset)
    if fmt == "avro":
        return decode_avro(value, topic=topic, partition=partition, offset=offset)
    return decode_sample(value, topic=topic, partition=partition, offset=offset)
