"""The record-type columns of one batch: each record decoded into lists, then built as Arrow arrays.

One builder per record kind (``tokens``, ``samples``, ``raw``, :data:`DECODERS`). A value
that does not decode as the kind's record type is kept whole: kind ``raw``, its bytes in
``value``, every decoded column null. Samples of a topic another producer wrote (JSON,
text: kafeed.formats) are decoded by the topic's format, their own bytes kept in ``value``.
Token ids are joined into one buffer and viewed with numpy; list and map columns are made
from offsets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from google.protobuf.message import DecodeError

from kafeed.formats import Rejected, ValueFormat
from kafeed.schema.codec import REUSE_BYTES, TOKEN_NUMPY_DTYPES
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample

if TYPE_CHECKING:
    import pyarrow as pa

DTYPE_NAMES = {code: str(np_dtype.newbyteorder("=")) for code, np_dtype in TOKEN_NUMPY_DTYPES.items()}
_ITEMSIZES = {code: np_dtype.itemsize for code, np_dtype in TOKEN_NUMPY_DTYPES.items()}
KIND_NAMES: dict[str, str] = {"tokens": "TokenizedDocument", "samples": "TrainingSample", "raw": "raw"}
_DOCUMENT = KIND_NAMES["tokens"]
Headers = tuple[tuple[str, bytes | None], ...]


def _lists(sizes: list[int], flat: pa.Array, present: list[bool], list_type: Any) -> pa.Array:
    """A large_list column from per-row sizes and the rows' elements end to end."""
    import pyarrow as pa

    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(np.asarray(sizes, dtype=np.int64), out=offsets[1:])
    mask = pa.array(np.logical_not(np.asarray(present, dtype=bool)))
    return pa.LargeListArray.from_arrays(pa.array(offsets), flat, type=list_type, mask=mask)


class Decoded:
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


class _Raw(Decoded):
    def decode(self, values: list[bytes | None]) -> None:
        for value in values:
            self.raw(value)


class Samples(Decoded):
    def __init__(self) -> None:
        super().__init__()
        self.input_data: list[bytes | None] = []

    def decode(self, values: list[bytes | None]) -> None:
        sample = TrainingSample()
        parsed = 0  # one message parses records in turn, a new one after REUSE_BYTES
        kind = KIND_NAMES["samples"]
        for value in values:
            if value is not None:
                if parsed > REUSE_BYTES:
                    sample, parsed = TrainingSample(), 0
                parsed += len(value)
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

    def decode_as(self, fmt: ValueFormat, topic: str, records: Sequence[tuple[int, int, int, bytes | None,
                                                                              Headers | None]]) -> None:
        """``records`` (partition, offset, timestamp, value, headers) by the topic's value format."""
        kind = KIND_NAMES["samples"]
        for partition, offset, stamp, value, headers in records:
            got = fmt.decode(value, headers or (), topic, partition, offset, stamp)
            if isinstance(got, Rejected) or value is None:
                self.raw(value)
                self.input_data.append(None)
                continue
            sample = got[0]
            self.common(sample, value, kind)
            self.input_data.append(sample.input_data)

    def arrays(self, types: Mapping[str, Any]) -> dict[str, pa.Array]:
        import pyarrow as pa

        return super().arrays(types) | {"input_data": pa.array(self.input_data, type=types["input_data"])}


class _Documents(Decoded):
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
        parsed = 0  # one message parses records in turn, a new one after REUSE_BYTES
        itemsizes = _ITEMSIZES
        common = self.common
        tokens_, codes, counts = self.tokens.append, self.codes.append, self.num_tokens.append
        tokenizer, in_topic = self.tokenizer.append, self.input_topic.append
        in_partition, in_offset = self.input_partition.append, self.input_offset.append
        for value in values:
            if value is not None:
                if parsed > REUSE_BYTES:
                    doc, parsed = TokenizedDocument(), 0
                parsed += len(value)
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
            "dtype": pa.array([DTYPE_NAMES.get(c) for c in self.codes], type=types["dtype"]),
            "num_tokens": pa.array(self.num_tokens, type=pa.int32()),
            "tokenizer": pa.array(self.tokenizer, type=types["tokenizer"]),
            "input_topic": pa.array(self.input_topic, type=types["input_topic"]),
            "input_partition": pa.array(self.input_partition, type=pa.int32()),
            "input_offset": pa.array(self.input_offset, type=pa.int64()),
        }


DECODERS: dict[str, type[Decoded]] = {"tokens": _Documents, "samples": Samples, "raw": _Raw}
