from __future__ import annotations

import pytest

from kafeed.errors import SchemaError
from kafeed.schema import (
    FORMAT_HEADER,
    RawFormat,
    decode_avro,
    decode_raw,
    encode_avro,
    encode_raw,
    format_headers,
    make_sample,
    raw_format_of,
)
from kafeed.schema.records_pb2 import TrainingSample


def _sample() -> TrainingSample:
    return make_sample("héllo wörld", id="doc-1", source="a.jsonl", targets=[1.0, 0.5, -2.0],
                       metadata={"kafeed.line": "3", "lang": "de"}, timestamp_ms=1_700_000_000_123)


def test_avro_round_trip_keeps_every_field() -> None:
    s = _sample()
    back = decode_avro(encode_avro(s))
    assert back == s
    assert back.input_data.decode() == "héllo wörld"
    assert list(back.target_values) == [1.0, 0.5, -2.0]
    assert dict(back.metadata) == {"kafeed.line": "3", "lang": "de"}


def test_avro_body_differs_from_protobuf() -> None:
    s = _sample()
    assert encode_raw(s, "avro") != encode_raw(s, "protobuf")


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
def test_decode_raw_picks_codec_from_headers(fmt: RawFormat) -> None:
    s = _sample()
    value = encode_raw(s, fmt)
    headers = format_headers(fmt)
    assert decode_raw(value, headers) == s
    assert decode_raw(value, dict(headers)) == s


def test_no_header_means_protobuf_and_protobuf_header_too() -> None:
    assert raw_format_of(None) == "protobuf"
    assert raw_format_of([("other", b"x")]) == "protobuf"
    assert raw_format_of([(FORMAT_HEADER, b"protobuf")]) == "protobuf"
    assert raw_format_of([(FORMAT_HEADER, "avro")]) == "avro"
    assert format_headers("protobuf") == []


def test_unknown_format_header_names_the_record() -> None:
    with pytest.raises(SchemaError, match=r"raw/2@17 .*unknown kafeed.format"):
        raw_format_of([(FORMAT_HEADER, b"json")], topic="raw", partition=2, offset=17)


def test_bad_avro_bytes_raise_schema_error_with_location() -> None:
    with pytest.raises(SchemaError, match=r"raw/0@5 is not an Avro TrainingSample"):
        decode_raw(b"\xff\xff\xff", [(FORMAT_HEADER, b"avro")], topic="raw", partition=0, offset=5)
    with pytest.raises(SchemaError, match="trailing bytes"):
        decode_avro(encode_avro(_sample()) + b"\x00")
    with pytest.raises(SchemaError, match="tombstone"):
        decode_raw(None, [(FORMAT_HEADER, b"avro")])
