from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kafeed.errors import SchemaError
from kafeed.schema import (
    UINT16,
    UINT32,
    decode_document,
    decode_sample,
    make_document,
    make_sample,
    token_dtype_for,
    unpack_tokens,
)
from kafeed.schema.generate import HERE, generate


def test_generated_modules_are_current(tmp_path: Path) -> None:
    for fresh in generate(tmp_path):
        committed = HERE / fresh.name
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{committed.name} is stale: run `python -m kafeed.schema.generate`")


def test_sample_round_trip_keeps_original_fields() -> None:
    s = make_sample("héllo", id="d1", source="f.jsonl", targets=[1.0, 0.5],
                    metadata={"lang": "fr"}, timestamp_ms=123)
    back = decode_sample(s.SerializeToString())
    assert back.input_data.decode() == "héllo"
    assert list(back.target_values) == [1.0, 0.5]
    assert dict(back.metadata) == {"lang": "fr"} and back.timestamp == 123 and back.id == "d1"


@pytest.mark.parametrize(("vocab", "dtype", "width"), [(50_000, UINT16, 2), (65_536, UINT16, 2),
                                                        (65_537, UINT32, 4), (200_000, UINT32, 4)])
def test_token_dtype_by_vocabulary(vocab: int, dtype: int, width: int) -> None:
    assert token_dtype_for(vocab) == dtype
    ids = np.array([0, 1, vocab - 1])
    doc = decode_document(make_document(ids, id="x", vocab_size=vocab).SerializeToString())
    assert doc.dtype == dtype and len(doc.tokens) == 3 * width
    assert unpack_tokens(doc.tokens, doc.dtype).tolist() == ids.tolist()


def test_little_endian_on_the_wire() -> None:
    doc = make_document([258], id="x", vocab_size=1000)
    assert doc.tokens == b"\x02\x01"


def test_ids_out_of_range_refused() -> None:
    with pytest.raises(ValueError, match="out of range"):
        make_document([70_000], id="x", vocab_size=1000)


def test_decode_errors_name_the_record() -> None:
    with pytest.raises(SchemaError, match=r"raw/3@17"):
        decode_sample(b"\xff\xff\xff", topic="raw", partition=3, offset=17)
    with pytest.raises(SchemaError, match="tombstone"):
        decode_document(None, topic="tokens", partition=0, offset=1)
    bad = make_document([1, 2, 3], id="x", vocab_size=100)
    bad.num_tokens = 5
    with pytest.raises(SchemaError, match="says 5 tokens"):
        decode_document(bad.SerializeToString(), topic="tokens", partition=0, offset=2)
