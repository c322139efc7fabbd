"""A record kind's fast decode (kafeed.loader.nodes.record_kinds.RecordKind.fast) against the
general one: on valid and mutated records, with and without a tokenizer asked for, both give
the same payload, or both refuse the record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafeed.kafka import FakeKafka
from kafeed.loader.nodes import record_kinds
from kafeed.loader.nodes.decode import RecordDecoder
from kafeed.loader.settings import LoaderSettings
from kafeed.schema import make_document
from tests.mutations import mutated

MANY = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
_POOL = [make_document(np.arange(i * 5 % 40, dtype=np.int64) + 65_530 * (i % 3 == 0), id=f"d{i}",
                       vocab_size=70_000 if i % 3 == 0 else 50_000,
                       tokenizer=f"tok{i % 2}").SerializeToString() for i in range(16)]


def _odd(num_tokens: int, dtype: int) -> bytes:
    doc = make_document(np.arange(6), id="odd", vocab_size=50_000, tokenizer="tok0")
    doc.num_tokens, doc.dtype = num_tokens, dtype  # type: ignore[assignment]
    return doc.SerializeToString()


# Well-formed protobuf, but not a good record: a token count that does not match the bytes, an
# unknown dtype.
_POOL += [_odd(7, 1), _odd(3, 1), _odd(6, 0), _odd(6, 9)]


def _decoder(tokenizer: str | None) -> RecordDecoder:
    loader = LoaderSettings(topics=("t",), seq_len=8, eos_id=0, tokenizer=tokenizer)
    return RecordDecoder(loader, FakeKafka())


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return bool(a.dtype == b.dtype and np.array_equal(a, b))


@MANY
@given(values=st.lists(st.one_of(st.none(), st.sampled_from(_POOL), mutated(_POOL)), min_size=1, max_size=20),
       tokenizer=st.sampled_from([None, "tok0", "tok1"]))
def test_the_fast_decode_agrees_with_the_general_one(values: list[bytes | None],
                                                     tokenizer: str | None) -> None:
    fast_decoder = _decoder(tokenizer)
    general_decoder = _decoder(tokenizer)
    fast = fast_decoder.for_partition("t", 0)
    assert fast_decoder.kind.fast is not None
    for offset, value in enumerate(values):
        entry = (offset, value, 0, len(value or b""), None)
        try:
            expected = general_decoder.decode("t", 0, entry)
        except Exception as exc:  # a topic judged of the wrong type: the fast decode must say so too
            try:
                fast(entry)
            except type(exc):
                return
            raise AssertionError(f"the general decode raised {exc!r}, the fast one did not") from None
        assert _same(fast(entry), expected)


def test_the_fast_decode_takes_a_good_record_only_once_its_topic_is_proven() -> None:
    decoder = _decoder(None)
    decode = decoder.for_partition("t", 0)
    assert decode((0, b"not a document", 0, 14, None)) is None
    assert decoder._unproven["t"][0] == 1  # the general decode judged it
    assert decode((1, _POOL[1], 0, len(_POOL[1]), None)).tolist() == list(range(5))
    assert "t" not in decoder._unproven
    assert decode((2, _POOL[2], 0, len(_POOL[2]), None)).tolist() == list(range(10))


@pytest.mark.parametrize("reuse_bytes", [record_kinds.REUSE_BYTES, 64])
def test_a_record_decoded_after_another_keeps_nothing_of_it(reuse_bytes: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast decode parses a partition's records into one message (a new one after
    ``REUSE_BYTES``): a field the next record lacks is not the last one's, and an array
    handed out stays as it was."""
    monkeypatch.setattr(record_kinds, "REUSE_BYTES", reuse_bytes)
    named = make_document(np.arange(5), id="named", vocab_size=50_000, tokenizer="tok0")
    unnamed = make_document(np.arange(7) + 9, id="unnamed", vocab_size=50_000, tokenizer="")
    for tokenizer in ("tok0", None):
        fast_decoder, general_decoder = _decoder(tokenizer), _decoder(tokenizer)
        fast = fast_decoder.for_partition("t", 0)
        handed = []
        for offset, value in enumerate([d.SerializeToString() for d in (named, unnamed, named)] * 40):
            entry = (offset, value, 0, len(value), None)
            expected = general_decoder.decode("t", 0, entry)
            got = fast(entry)
            assert _same(got, expected), (tokenizer, offset)
            handed.append((got, expected))
        assert all(_same(got, expected) for got, expected in handed)
