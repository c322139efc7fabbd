"""Decode raw records into samples and text; a record that cannot be decoded is a dead letter.

Values are ``TrainingSample`` records, Protobuf or Avro as the ``kafeed.format``
header says (:mod:`kafeed.schema.avro`). The text is ``input_data`` as strict
UTF-8: anything else is rejected with kind ``encoding`` rather than guessed at. A
mirrored record's ``kafeed.mirror.origin`` header (its site record) goes into the
sample's metadata, so the document, and a checkpoint's lineage, keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.errors import SchemaError
from kafeed.mirror.origin import ORIGIN_HEADER
from kafeed.schema.avro import decode_raw
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import DeadLetter, Record


@dataclass(frozen=True)
class Decoded:
    record: Record
    sample: TrainingSample
    text: str


@dataclass
class DecodeResult:
    decoded: list[Decoded] = field(default_factory=list)
    rejected: list[DeadLetter] = field(default_factory=list)


def decode_value(record: Record) -> TrainingSample:
    """The sample inside ``record`` (raises :class:`SchemaError`)."""
    return decode_raw(record.value, list(record.headers), topic=record.topic,
                      partition=record.partition, offset=record.offset)


def decode_batch(records: Sequence[Record]) -> DecodeResult:
    result = DecodeResult()
    for record in records:
        try:
            sample = decode_value(record)
        except SchemaError as exc:
            result.rejected.append(DeadLetter(record, "decode", exc.message))
            continue
        try:
            text = sample.input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            result.rejected.append(DeadLetter(
                record, "encoding", f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        for name, value in record.headers or ():
            if name == ORIGIN_HEADER and value is not None:  # a mirrored record: its site record
                sample.metadata[ORIGIN_HEADER] = value.decode("utf-8", "replace")
        result.decoded.append(Decoded(record, sample, text))
    return result
