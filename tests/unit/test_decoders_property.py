"""Property tests of every record decoder: random bytes and mutated valid encodings.

Whatever the input, a decoder returns a record, raises a :class:`KafeedError` subclass,
or (ingest's readers and mapping, prepare's batch decode) reports a dead letter with a
reason. Nothing else may escape. 10,000 inputs per decoder.
"""

from __future__ import annotations

import io
import json
import math
import random
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafeed.errors import KafeedError
from kafeed.ingest import IngestOptions
from kafeed.ingest.batches import Item, Position
from kafeed.ingest.csv_rows import read_csv
from kafeed.ingest.mapping import Mapper, Rejected
from kafeed.ingest.readers import read_jsonl
from kafeed.prepare.decode import decode_batch
from kafeed.schema import decode_avro, decode_document, decode_raw, decode_sample, encode_avro, make_document
from kafeed.schema.records_pb2 import TokenizedDocument, TrainingSample
from kafeed.stream import Record
from tests.mutations import edit, mutated

# How many examples: the hypothesis profile (tests/conftest.py), 10,000 under `make test-all`.
MANY = settings(deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def _sample_pool(n: int = 64) -> list[TrainingSample]:
    rng = random.Random(0)
    texts = [b"", b"plain text", "caf\u00e9 \u2603 \U0001f600".encode(), b"\xff\xfe not utf-8",
             bytes(range(256)), b"x" * 300]
    out = []
    for i in range(n):
        sample = TrainingSample(input_data=texts[i % len(texts)], id=f"id-{i}" * (i % 3),
                                source=["", "s.jsonl", "\u00fc"][i % 3],
                                timestamp=rng.choice([0, 1, -1, 2**63 - 1, -(2**63), rng.randrange(2**40)]))
        sample.target_values.extend(rng.uniform(-1e6, 1e6) for _ in range(i % 4))
        sample.metadata.update({f"k{j}": "v" * j for j in range(i % 3)})
        out.append(sample)
    return out


_SAMPLES = _sample_pool()
_DOCUMENTS = [make_document([*range(i * 7 % 50), 65_535 * (i % 2)], id=f"d{i}",
                            vocab_size=[65_536, 1 << 20][i % 2], tokenizer="t", source="s")
              for i in range(32)]
_protobuf_inputs = st.one_of(st.binary(max_size=256), mutated([s.SerializeToString() for s in _SAMPLES]))
_avro_inputs = st.one_of(st.binary(max_size=256), mutated([encode_avro(s) for s in _SAMPLES]))


@MANY
@given(_protobuf_inputs)
def test_training_sample_decoder(value: bytes) -> None:
    try:
        sample = decode_sample(value, topic="raw", partition=0, offset=7)
    except KafeedError as exc:
        assert "raw/0@7" in exc.message
        return
    assert isinstance(sample, TrainingSample)


@MANY
@given(st.one_of(st.binary(max_size=256), mutated([d.SerializeToString() for d in _DOCUMENTS])))
def test_tokenized_document_decoder(value: bytes) -> None:
    try:
        doc = decode_document(value, topic="tokens", partition=1, offset=2)
    except KafeedError as exc:
        assert "tokens/1@2" in exc.message
        return
    assert isinstance(doc, TokenizedDocument)
    assert len(doc.tokens) == doc.num_tokens * (2 if doc.dtype == 1 else 4)


@MANY
@given(_avro_inputs)
def test_avro_decoder(value: bytes) -> None:
    try:
        sample = decode_avro(value, topic="raw", partition=0, offset=3)
    except KafeedError as exc:
        assert "raw/0@3" in exc.message
        return
    assert isinstance(sample, TrainingSample)


_headers = st.one_of(
    st.none(),
    st.lists(st.tuples(st.sampled_from(["kafeed.format", "other"]),
                       st.one_of(st.sampled_from([b"avro", b"protobuf"]), st.binary(max_size=6))),
             max_size=2),
)


@MANY
@given(st.lists(st.tuples(st.one_of(st.none(), _protobuf_inputs, _avro_inputs), _headers),
                min_size=1, max_size=2))
def test_prepare_batch_decode_dead_letters_what_it_cannot_read(
        values: list[tuple[bytes | None, Any]]) -> None:
    records = [Record(topic="raw", partition=0, offset=i, key=None, value=v, headers=tuple(h or ()))
               for i, (v, h) in enumerate(values)]
    result = decode_batch(records)
    assert len(result.decoded) + len(result.rejected) == len(records)
    for bad in result.rejected:
        assert bad.kind in ("decode", "encoding") and bad.reason
    for good in result.decoded:
        assert good.text == good.sample.input_data.decode("utf-8")
        # decode_raw agrees with the batch decoder on what it accepted.
        assert decode_raw(good.record.value, list(good.record.headers)) == good.sample


# -- ingest: a line or a row → a sample, or a dead letter with a reason --------------------------

# Values chosen to reach every branch of the mapping: huge integers, doubles past the
# float32 range, lone surrogates, containers where scalars belong. Drawn by index (cheap).
_ABSENT = object()
_VALUES: list[Any] = [
    _ABSENT, None, True, 0, -1, 7, 2**70, 10**400, -(10**309), 0.5, 1e300, -3.5e38, 3.4e38,
    math.nan, math.inf, "", " ", "\t\n", "text", "caf\u00e9", "nan", "1e999", "3.5e38", "-1e39", "12",
    "\ud800", "a\x00b", "x" * 5000, [], [1, 2.5], [1, "x"], ["1e39"], [None], {"a": 1}, {"t": "x"},
]
_KEYS = ("text", "id", "y", "m", "other")
_objects = st.tuples(*(st.sampled_from(_VALUES) for _ in _KEYS)).map(
    lambda vals: {k: v for k, v in zip(_KEYS, vals, strict=True) if v is not _ABSENT})
_MAPPERS = [Mapper(IngestOptions(label_field="y", meta_fields=("m",), format=fmt), max_value_bytes=4096)
            for fmt in ("protobuf", "avro")]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass") + b"\n"


def _check_mapping(items: list[Item], mapper: Mapper) -> None:
    for where, fields, _raw, reject in items:
        if reject is not None:
            assert reject.kind and reject.reason
            continue
        assert fields is not None
        result = mapper.map(fields, source="s.jsonl", where_key="kafeed.line", where=where, timestamp_ms=1)
        if isinstance(result, Rejected):  # a dead letter
            assert result.kind and result.reason
            continue
        key, value = result
        sample = decode_avro(value) if mapper.avro else decode_sample(value)
        assert sample.input_data == fields["text"].encode()
        assert sample.id == key
        assert all(math.isfinite(t) and abs(t) <= _FLOAT32_MAX for t in sample.target_values)


@MANY
@given(st.one_of(st.binary(max_size=200), _objects.map(_line),
                 st.builds(edit, _objects.map(_line), st.binary(min_size=3, max_size=12))),
       st.sampled_from(_MAPPERS))
def test_jsonl_lines_become_samples_or_dead_letters(data: bytes, mapper: Mapper) -> None:
    batches = list(read_jsonl(io.BytesIO(data), Position(), 2))
    items = [i for b, _ in batches for i in b]
    assert not batches or batches[-1][1].offset == len(data)
    _check_mapping(items, mapper)


def _csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    import csv

    csv.writer(out).writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


_CELLS = ["", "1.5", "1e40", "nan", "-inf", "7", "text", "two words", "a,b", 'say "hi"', "line\nbreak",
          "\u00e9\u2603", "\x00", " "]
_tables = st.lists(st.tuples(*(st.sampled_from(_CELLS) for _ in range(3))), max_size=3).map(
    lambda rows: _csv([["id", "text", "y"], *map(list, rows)]))


@MANY
@given(st.one_of(st.binary(max_size=200), _tables,
                 st.builds(edit, _tables, st.binary(min_size=3, max_size=12))), st.sampled_from(_MAPPERS))
def test_csv_rows_become_samples_or_dead_letters(data: bytes, mapper: Mapper) -> None:
    batches = list(read_csv(io.BytesIO(data), Position(), 2))
    items = [i for b, _ in batches for i in b]
    _check_mapping(items, mapper)
