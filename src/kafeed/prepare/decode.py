"""Decode raw records into samples and text; a record that cannot be decoded is a :class:`Rejection`.

Values are ``TrainingSample`` records, Protobuf or Avro as the ``kafeed.format``
header says (:mod:`kafeed.schema.avro`). The text is ``input_data`` as strict
UTF-8: anything else is rejected with kind ``encoding`` rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.errors import SchemaError
from kafeed.schema.avro import decode_raw
from kafeed.schema.records_pb2 import TrainingSample


@dataclass(frozen=True)
class RawRecord:
    """One consumed record, detached from the client's Message object."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int = 0


@dataclass(frozen=True)
class Decoded:
    record: RawRecord
    sample: TrainingSample
    text: str


@dataclass(frozen=True)
class Rejection:
    """A record that goes to the dead-letter topic, with why."""

    record: RawRecord
    kind: str
    reason: str


@dataclass
class DecodeResult:
    decoded: list[Decoded] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def decode_value(record: RawRecord) -> TrainingSample:
    """The sample inside ``record`` (raises :class:`SchemaError`)."""
    return decode_raw(record.value, list(record.headers), topic=record.topic,
                      partition=record.partition, offset=record.offset)


def decode_batch(records: Sequence[RawRecord]) -> DecodeResult:
    result = DecodeResult()
    for record in records:
        try:
            sample = decode_value(record)
        except SchemaError as exc:
            result.rejected.append(Rejection(record, "decode", exc.message))
            continue
        try:
            text = sample.input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            result.rejected.append(Rejection(
                record, "encoding", f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        result.decoded.append(Decoded(record, sample, text))
    return result
