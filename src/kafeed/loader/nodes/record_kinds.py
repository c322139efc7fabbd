"""The record kinds the loader reads, in one registry: how each is decoded.

A kind says how a record's bytes become a payload (:attr:`RecordKind.parse`, for Kafka
records), how a table's columns do (:attr:`RecordKind.from_columns`, for the archive's
cold tier and for local files), which protobuf message it is, and whether its payloads are
token arrays packed into windows. Readers, decoders and sources look the kind up here and
never test its name.

A kind may also give :attr:`RecordKind.fast`: a partition's decode of its good records in
one call, which the reader's hot loop runs once per record (kafeed.loader.nodes.decode). Anything it
does not take as good goes to the general decode, which names, counts and dead-letters it.

To add a kind: add a :class:`RecordKind` to :data:`KINDS` (and its name to
kafeed.loader.settings.Kind).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from kafeed.archive.rows import KIND_NAMES
from kafeed.errors import SchemaError
from kafeed.formats import Rejected, ValueFormat
from kafeed.schema.codec import REUSE_BYTES, TOKEN_NUMPY_DTYPES, decode_document, decode_sample, unpack_tokens
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample

if TYPE_CHECKING:
    import pyarrow as pa

# numpy parses keyword arguments slowly: np.frombuffer(data, dtype=d) costs 0.1 us more per
# record than _frombuffer(data, d)
_frombuffer = np.frombuffer
MAX_TOKEN_ID = 2**32 - 1  # token ids travel as uint16 or uint32
# Where a record came from, named in errors: (topic, partition, offset), or None.
Where: TypeAlias = tuple[str, int, int] | None
# value (None: a tombstone), where it came from, the tokenizer asked for ->
# (payload, decoded protobuf message)
Parse = Callable[["bytes | None", Where, "str | None"], tuple[Any, Message]]
FromColumns = Callable[["pa.Table", Any, "str | None"], list[Any]]
# A queued record (kafeed.loader.sources.partition.Entry) -> its payload, or what the general decode
# makes of it.
Decode = Callable[[tuple[int, Any, int, int, Any]], Any]
# (topic, tokenizer asked for, topics not yet proven, the general decode) -> one partition's
# decode (see the module docstring)
Fast = Callable[[str, "str | None", Container[str], Decode], Decode]


@dataclass(frozen=True)
class RecordKind:
    """One record kind (see the module docstring)."""

    name: str
    message: str  # the protobuf message its records are
    hint: str  # what to do when a topic holds other records
    packs: bool  # payloads are token arrays, packed into windows
    columns: tuple[str, ...]  # the archive table's columns a payload is made of
    parse: Parse
    from_columns: FromColumns
    count: Callable[[Any], int]  # tokens in a payload (the reader's stats)
    tokenizer_of: Callable[[bytes], str | None]  # the tokenizer a well-formed record names
    fast: Fast | None = None


def _parse_tokens(value: bytes | None, where: Where, tokenizer: str | None) -> tuple[Any, Message]:
    # Fast path, the hot loop: parse, check, one np.frombuffer. Anything odd goes through
    # decode_document, which names the record in its error.
    doc = TokenizedDocument()
    try:
        if value is not None:  # a tombstone: decode_document says so
            doc.ParseFromString(value)
            dtype = TOKEN_NUMPY_DTYPES.get(doc.dtype)
            data = doc.tokens
            if dtype is not None and len(data) == doc.num_tokens * dtype.itemsize and (
                    tokenizer is None or doc.tokenizer == tokenizer):
                return _frombuffer(data, dtype), doc
    except Exception:
        pass
    topic, partition, offset = where or (None, None, None)
    doc = decode_document(value, topic=topic, partition=partition, offset=offset)
    if tokenizer is not None and doc.tokenizer != tokenizer:
        raise SchemaError(f"record {topic}/{partition}@{offset} was tokenized with "
                          f"{doc.tokenizer!r}, not {tokenizer!r}.")
    return unpack_tokens(doc.tokens, doc.dtype), doc


def _fast_tokens(topic: str, tokenizer: str | None, unproven: Container[str], general: Decode) -> Decode:
    """The tokens kind's :attr:`RecordKind.fast`: _parse_tokens's fast path in one frame, with
    no tuple made for where the record came from (the general decode's frames and that tuple
    cost 0.4 us of its 1.4 us per record). A topic not yet proven to hold the kind goes to the
    general decode, which judges it (kafeed.loader.nodes.decode).

    One message parses the partition's records in turn (``tokens`` is a copy of its bytes),
    a new one once it has parsed kafeed.schema.codec.REUSE_BYTES."""
    document = TokenizedDocument
    dtypes = TOKEN_NUMPY_DTYPES
    frombuffer = _frombuffer
    doc = document()
    parsed = 0

    def decode(entry: tuple[int, Any, int, int, Any]) -> Any:
        nonlocal doc, parsed
        if topic in unproven:
            return general(entry)
        if parsed > REUSE_BYTES:
            doc, parsed = document(), 0
        parsed += entry[3]
        try:
            doc.ParseFromString(entry[1])
        except Exception:  # a tombstone (None) too: the general decode names what it is
            return general(entry)
        dtype = dtypes.get(doc.dtype)
        data = doc.tokens
        count = doc.num_tokens
        if dtype is None or len(data) != count * dtype.itemsize or (
                tokenizer is not None and doc.tokenizer != tokenizer):
            return general(entry)
        return frombuffer(data, dtype)

    return decode


def _sample_payload(sample: TrainingSample) -> dict[str, Any]:
    return {
        "id": sample.id, "input": sample.input_data,
        "targets": np.asarray(sample.target_values, dtype=np.float32),
        "metadata": dict(sample.metadata), "source": sample.source, "timestamp": sample.timestamp,
    }


def _parse_sample(value: bytes | None, where: Where, tokenizer: str | None) -> tuple[Any, Message]:
    topic, partition, offset = where or (None, None, None)
    sample = decode_sample(value, topic=topic, partition=partition, offset=offset)
    return _sample_payload(sample), sample


def parse_as(fmt: ValueFormat, value: bytes | None, where: tuple[str, int, int],
             timestamp_ms: int) -> tuple[Any, Message]:
    """The samples kind's parse for a topic of value format ``fmt`` (kafeed.formats: JSON, text):
    a record it rejects raises :class:`SchemaError` with the reason, as a bad TrainingSample does."""
    topic, partition, offset = where
    got = fmt.decode(value, (), topic, partition, offset, timestamp_ms)
    if isinstance(got, Rejected):
        raise SchemaError(f"record {topic}/{partition}@{offset} is no {fmt.name} sample: "
                          f"{got.reason} ({got.kind}).")
    return _sample_payload(got[0]), got[0]


def _document_tokenizer(value: bytes) -> str | None:
    try:
        doc = decode_document(value)
    except SchemaError:
        return None
    return None if lenient(doc) else doc.tokenizer


def _column_is(data: pa.Table, column: str, value: str) -> Any:
    import pyarrow.compute as pc

    return pc.fill_null(pc.equal(data[column], value), False).to_numpy(zero_copy_only=False)


def token_arrays(column: pa.ChunkedArray, rows: Any = None, *, name: str = "tokens") -> list[Any]:
    """The token arrays of a list<int> column (views of its buffers, never copied), of
    ``rows`` (indices, in the order given) or of every row. Ids outside 0 .. 2**32-1 are
    refused."""
    chunks = column.chunks
    bounds = [c.offsets.to_numpy() for c in chunks]
    flats = [c.values.to_numpy(zero_copy_only=False) for c in chunks]
    for flat, cuts in zip(flats, bounds, strict=True):
        used = flat[cuts[0]:cuts[-1]]
        if used.dtype.kind == "u" and used.dtype.itemsize <= 4:
            continue  # unsigned of 32 bits or fewer: every value is a token id
        if used.size and (int(used.min()) < 0 or int(used.max()) > MAX_TOKEN_ID):
            raise SchemaError(f"Column {name!r} holds values outside 0..2**32-1, which are no token ids.",
                              hint="Name the column of token ids (a list of integers per row): column=.")
    if rows is None:
        out: list[Any] = []
        for flat, cuts in zip(flats, bounds, strict=True):
            # One slice per row, a view (np.split costs several numpy calls per piece).
            edges = cuts.tolist()
            out.extend(flat[a:b] for a, b in itertools.pairwise(edges))
        return out
    starts = np.cumsum([0, *(len(c) for c in chunks)])
    which = np.searchsorted(starts, rows, side="right") - 1
    return [flats[c][bounds[c][r - starts[c]]:bounds[c][r - starts[c] + 1]]
            for r, c in zip(rows.tolist(), which.tolist(), strict=True)]


def _token_columns(data: pa.Table, rows: Any, tokenizer: str | None) -> list[Any]:
    """Token arrays of ``rows`` of an archive table; None for rows to decode from their bytes
    (kept raw by the archive, or of another tokenizer)."""
    good = _column_is(data, "kind", KIND_NAMES["tokens"])
    if tokenizer is not None:
        good &= _column_is(data, "tokenizer", tokenizer)
    if rows is None:
        rows = np.arange(data.num_rows)
    arrays = token_arrays(data["tokens"], rows)
    return [a if good[r] else None for r, a in zip(rows.tolist(), arrays, strict=True)]


def _sample_columns(data: pa.Table, rows: Any, tokenizer: str | None) -> list[Any]:
    out: list[Any] = []
    for row in (data if rows is None else data.take(rows)).to_pylist():
        if row["kind"] != KIND_NAMES["samples"]:
            out.append(None)
            continue
        out.append({
            "id": row["id"], "input": row["input_data"],
            "targets": np.asarray(row["targets"] or (), dtype=np.float32),
            "metadata": dict(row["metadata"] or ()), "source": row["source"],
            "timestamp": row["event_time_ms"],
        })
    return out


TOKENS = RecordKind(
    name="tokens", message="TokenizedDocument", packs=True,
    hint="KafkaTokenDataset reads TokenizedDocument records, which `kafeed prepare` writes; for the "
         "TrainingSample records `kafeed ingest` writes, use KafkaSampleDataset (or run `kafeed "
         "prepare` on this topic first).",
    columns=("offset", "timestamp", "kind", "tokens", "tokenizer"),
    parse=_parse_tokens, from_columns=_token_columns, count=len, tokenizer_of=_document_tokenizer,
    fast=_fast_tokens)
SAMPLES = RecordKind(
    name="samples", message="TrainingSample", packs=False,
    hint="KafkaSampleDataset reads TrainingSample records, which `kafeed ingest` writes; for the "
         "TokenizedDocument records `kafeed prepare` writes, use KafkaTokenDataset; for a topic another "
         "producer wrote (JSON, text), declare its value format (formats=, --value-format; docs/formats.md).",
    columns=("offset", "timestamp", "kind", "id", "input_data", "targets", "metadata", "source",
             "event_time_ms"),
    parse=_parse_sample, from_columns=_sample_columns, count=lambda payload: 0,
    tokenizer_of=lambda value: None)

KINDS: dict[str, RecordKind] = {kind.name: kind for kind in (TOKENS, SAMPLES)}


def lenient(record: Message) -> bool:
    """Whether protobuf accepted ``record`` only leniently: another message type parses with
    fields it does not know, so such a record proves nothing about its topic."""
    return bool(len(UnknownFieldSet(record)))
