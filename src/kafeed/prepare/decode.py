"""Decode raw records into samples and text; a record that cannot be decoded is a dead letter.

Each input topic's value format (kafeed.formats: kafeed's ``TrainingSample``, JSON, text)
turns a record into a sample, or into a dead letter of the format's kind (``decode``,
``missing_text``, ...). The text is ``input_data`` as strict UTF-8: anything else is
rejected with kind ``encoding`` rather than guessed at. A mirrored record's
``kafeed.mirror.origin`` header (its site record) goes into the sample's metadata, so the
document, and a checkpoint's lineage, keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.formats import Decoders, Rejected
from kafeed.mirror.origin import ORIGIN_HEADER
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import DeadLetter, Record

_KAFEED = Decoders()


@dataclass(frozen=True)
class Decoded:
    record: Record
    sample: TrainingSample
    text: str


@dataclass
class DecodeResult:
    decoded: list[Decoded] = field(default_factory=list)
    rejected: list[DeadLetter] = field(default_factory=list)


def decode_batch(records: Sequence[Record], decoders: Decoders = _KAFEED) -> DecodeResult:
    """Each record by its topic's format (``decoders``; kafeed's own records by default)."""
    result = DecodeResult()
    decode = decoders.decode
    for record in records:
        got = decode(record.value, record.headers, record.topic, record.partition, record.offset,
                     record.timestamp_ms)
        if isinstance(got, Rejected):
            result.rejected.append(DeadLetter(record, got.kind, got.reason))
            continue
        sample, text = got
        for name, value in record.headers or ():
            if name == ORIGIN_HEADER and value is not None:  # a mirrored record: its site record
                sample.metadata[ORIGIN_HEADER] = value.decode("utf-8", "replace")
        result.decoded.append(Decoded(record, sample, text))
    return result
