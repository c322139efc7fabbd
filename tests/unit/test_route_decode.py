"""The batch decoder and batch language detector against their per-record references.

``decode_columns`` splits most Protobuf values with numpy and leaves the rest to upb; it
must keep, reject and read exactly what decoding each record with upb does, and the
rules must route its columns as they route columns of upb-parsed samples.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafeed.errors import SchemaError
from kafeed.route import detect_language, parse_rules
from kafeed.route.columns import Columns
from kafeed.route.decode import decode_columns, scan_samples
from kafeed.route.language import detect_languages
from kafeed.schema import encode_avro, format_headers, make_sample
from kafeed.schema.avro import decode_raw
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import Record, RecordBatch

RULES = parse_rules({
    "default": "other",
    "rule": [
        {"name": "code", "regex": r"^\s*def ", "to": "code"},
        {"name": "wiki", "source": ["wiki", "wïki", ""], "to": "wiki"},
        {"name": "labelled", "label": [1, 2.5], "to": "labelled"},
        {"name": "tagged", "metadata": {"lang": True}, "to": "tagged"},
        {"name": "en", "language": "en", "min_length": 5, "to": "en"},
        {"name": "tiny", "max_length": 3, "to": "drop"},
    ],
})


def _reference(records: Sequence[Record]) -> tuple[list[Record], Columns, list[tuple[int, str, str]]]:
    """Each record alone through upb (or its format header's codec), as the router did before."""
    kept, samples, texts, rejected = [], [], [], []
    for r in records:
        try:
            if r.headers or r.value is None:
                sample = decode_raw(r.value, list(r.headers), topic=r.topic, partition=r.partition,
                                    offset=r.offset)
            else:
                try:
                    sample = TrainingSample.FromString(r.value)
                except DecodeError:
                    sample = decode_raw(r.value, [], topic=r.topic, partition=r.partition, offset=r.offset)
        except SchemaError as exc:
            rejected.append((r.offset, "decode", exc.message))
            continue
        try:
            text = sample.input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})"
            rejected.append((r.offset, "encoding", reason))
            continue
        kept.append(r)
        samples.append(sample)
        texts.append(text)
    return kept, Columns(samples, texts, [r.headers for r in kept]), rejected


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    body = _varint(len(payload)) + payload if wire == 2 else payload
    return _varint(number << 3 | wire) + body


_texts = st.one_of(st.text(max_size=40), st.binary(max_size=12),
                   st.sampled_from(["def f(): pass", "the cat and the dog is in the house", "ok"]))
_samples = st.builds(
    lambda text, source, id_, ts, targets, meta: make_sample(
        text, id=id_, source=source, timestamp_ms=ts, targets=targets, metadata=meta).SerializeToString(),
    _texts, st.sampled_from(["wiki", "news", "wïki", "", "wiki2"]),
    st.one_of(st.text("d0123", max_size=6), st.text("d0123", max_size=6), st.text(max_size=6)),
    st.one_of(st.just(0), st.integers(0, 2**40), st.integers(-(2**63), 2**63 - 1)),
    st.one_of(st.just([]), st.just([]), st.lists(st.sampled_from([1.0, 2.5, 0.0]), max_size=2)),
    st.one_of(st.just({}), st.just({}), st.dictionaries(st.sampled_from(["lang", "x"]), st.text(max_size=3),
                                                        max_size=2)))
_raw_fields = st.lists(st.one_of(
    st.tuples(st.sampled_from([1, 5, 6]), st.just(2), st.binary(max_size=8)),         # text, id, source
    st.tuples(st.just(4), st.just(0), st.binary(min_size=1, max_size=11)),             # any varint bytes
    st.tuples(st.just(4), st.just(0), st.integers(0, 2**64 - 1).map(_varint)),
    st.tuples(st.integers(1, 40), st.sampled_from([0, 1, 2, 5]), st.binary(max_size=8)),
), max_size=6).map(lambda fs: b"".join(_field(n, w, p) for n, w, p in fs))


@st.composite
def _values(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["sample"] * 5 + ["two", "cut", "flip", "fields", "fields", "bytes", "none"]))
    if kind == "none":
        return None
    if kind == "bytes":
        return draw(st.binary(max_size=20))
    if kind == "fields":
        return draw(_raw_fields)
    value = draw(_samples)
    if kind == "two":  # a field given twice: the last wins
        return value + draw(_samples)
    if kind == "cut" and value:
        return value[:draw(st.integers(0, len(value) - 1))]
    if kind == "flip" and value:
        at = draw(st.integers(0, len(value) - 1))
        return value[:at] + bytes([draw(st.integers(0, 255))]) + value[at + 1:]
    return value


@st.composite
def _records(draw: st.DrawFn) -> list[Record]:
    records = []
    for offset, value in enumerate(draw(st.lists(_values(), max_size=25))):
        headers: tuple[tuple[str, bytes], ...] = ()
        if value is not None and draw(st.integers(0, 9)) == 0:  # now and then an Avro record
            headers = tuple(format_headers("avro"))
            value = encode_avro(make_sample(draw(_texts), id="a", source="wiki"))
        records.append(Record("raw", 0, offset, b"k", value, headers))
    return records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_batch_decode_keeps_rejects_and_routes_as_upb_per_record(records: list[Record]) -> None:
    batch = RecordBatch.of(records)
    indices, columns, rejected = decode_columns(batch)
    kept = [batch[i] for i in indices.tolist()]
    ref_kept, ref_columns, ref_rejected = _reference(records)
    assert [r.offset for r in kept] == [r.offset for r in ref_kept]
    assert sorted((d.record.offset, d.kind, d.reason) for d in rejected) == sorted(ref_rejected)
    assert columns.texts == ref_columns.texts
    assert columns.sources == ref_columns.sources
    assert list(columns.source_in(frozenset({"wiki", "wïki", ""}))) == [
        s in {"wiki", "wïki", ""} for s in ref_columns.sources]
    assert columns.labels == ref_columns.labels
    assert [dict(columns.metadata(i)) for i in range(len(kept))] == [
        dict(ref_columns.metadata(i)) for i in range(len(kept))]
    assert RULES.assign(columns) == RULES.assign(ref_columns)


def test_the_scan_takes_plain_samples_and_leaves_other_shapes_to_upb() -> None:
    plain = make_sample("the text", id="d1", source="wiki", timestamp_ms=2**40).SerializeToString()
    labelled = make_sample("x", id="d2", targets=[1.0]).SerializeToString()
    unicode_source = make_sample("x", id="d3", source="wïki").SerializeToString()
    negative_time = make_sample("x", id="d4", timestamp_ms=-1).SerializeToString()
    values = [plain, labelled, unicode_source, negative_time, b"", plain + plain]
    scan = scan_samples(values)
    assert scan.ok.tolist() == [True, False, False, False, True, True]
    assert scan.buf[scan.text[0][0]:scan.text[1][0]] == b"the text"
    assert scan.buf[scan.source[0][5]:scan.source[1][5]] == b"wiki"  # the second copy's
    assert scan.source[0][5] > sum(map(len, values[:5])) + len(plain)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.lists(st.sampled_from(["the", "and", "der", "die", "und", "le", "la", "de", "el", "il", "o", "a",
                              "het", "een", "is", "que", "x", "River", "Stadt", "123", "it's", "co-op",
                              "thé", "für", "Кошка", "猫", "della", "nicht", "\n", "the2"]),
             max_size=20).map(" ".join),
    st.text(max_size=30)), max_size=30))
def test_batch_language_detection_is_the_per_text_one(texts: list[str]) -> None:
    assert detect_languages(texts) == [detect_language(t) for t in texts]


def test_batch_language_detection_reads_only_the_first_2000_characters() -> None:
    texts = ["x " * 1000 + "the and the of", "the and of " + "x " * 2000, "".join(["und die "] * 400)]
    assert detect_languages(texts) == [detect_language(t) for t in texts] == ["und", "en", "de"]


def test_every_ascii_stop_word_fits_the_batch_key() -> None:
    from kafeed.route.language import _KEY_BYTES, _STOP_WORDS

    assert max(len(w) for words in _STOP_WORDS.values() for w in words if w.isascii()) <= _KEY_BYTES
