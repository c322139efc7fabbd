"""The archive's pure parts: records to rows and back, and which rows a commit may add."""

from __future__ import annotations

import pytest

from kafeed.archive import ArchiveSettings, columns
from kafeed.archive.commit import plan_commit
from kafeed.archive.position import decode_positions, encode_positions
from kafeed.archive.rows import Headers, RecordBatch, RowMapper, record_headers, record_value
from kafeed.archive.schema import Kind
from kafeed.errors import ConfigError
from kafeed.schema import make_document, make_sample
from kafeed.schema.codec import REUSE_BYTES


def _doc(n: int) -> bytes:
    return make_document(list(range(n)), id=f"d{n}", vocab_size=70000, tokenizer="tok", source="s",
                         input_topic="raw", input_partition=1, input_offset=n, metadata={"b": "2", "a": "1"},
                         targets=[0.5]).SerializeToString()


Record = tuple[int, int, int, bytes | None, bytes | None, Headers]


def _batch(*records: Record) -> RecordBatch:
    batch = RecordBatch("t")
    for rec in records:
        batch.add(*rec)
    return batch


def test_documents_map_to_columns_and_back_to_the_same_bytes() -> None:
    records: list[Record] = [(1, 9, 1_700_000_000_000, b"k9", _doc(3), (("h", b"v"), ("n", None))),
                             (0, 4, 1_700_000_000_001, None, _doc(0), ()),
                             (0, 5, 1_700_000_000_002, b"bad", b"\xff\xfe not protobuf", ()),
                             (0, 6, 1_700_000_000_003, b"gone", None, ())]
    mapper = RowMapper("tokens")
    table = mapper.rows(_batch(*records))
    rows = table.to_pylist()
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 4), (0, 5), (0, 6), (1, 9)]
    by_offset = {r["offset"]: r for r in rows}
    doc = by_offset[9]
    assert doc["kind"] == "TokenizedDocument" and doc["tokens"] == [0, 1, 2] and doc["dtype"] == "uint32"
    assert doc["num_tokens"] == 3 and doc["input_offset"] == 3 and doc["tokenizer"] == "tok"
    assert dict(doc["metadata"]) == {"a": "1", "b": "2"} and doc["targets"] == [0.5]
    assert doc["timestamp"].timestamp() == 1_700_000_000.0
    assert by_offset[4]["tokens"] == []
    assert by_offset[5]["kind"] == by_offset[6]["kind"] == "raw"
    for _, offset, _, _, value, headers in records:
        row = by_offset[offset]
        assert record_value(row) == value
        assert record_headers(row) == headers
    assert (mapper.stats.rows, mapper.stats.decoded, mapper.stats.kept_raw) == (4, 2, 2)


def test_a_batch_of_mixed_token_dtypes_keeps_every_documents_ids() -> None:
    small = make_document([7, 8], id="s", vocab_size=10).SerializeToString()  # uint16 ids
    large = make_document([65_536, 1, 70_000], id="l", vocab_size=70_001).SerializeToString()  # uint32 ids
    batch = _batch((2, 3, 0, None, large, ()), (0, 1, 0, None, small, ()), (2, 2, 0, None, b"\x01", ()),
                   (0, 0, 0, None, large, ()))
    assert batch.ranges() == {0: (0, 2), 2: (2, 4)}
    rows = RowMapper("tokens").rows(batch).to_pylist()
    assert [r["tokens"] for r in rows] == [[65_536, 1, 70_000], [7, 8], None, [65_536, 1, 70_000]]
    assert [r["dtype"] for r in rows] == ["uint32", "uint16", None, "uint32"]


def test_decoding_in_steps_gives_the_rows_of_decoding_at_once() -> None:
    docs = [(0, i, i, None, _doc(i % 4), ()) for i in range(10)]
    whole = RowMapper("tokens").rows(_batch(*docs))
    mapper = RowMapper("tokens")
    batch = RecordBatch("t")
    for rec in docs:
        batch.add(*rec)
        mapper.decode(batch)
    assert mapper.rows(batch).equals(whole)


@pytest.mark.parametrize("kind", ["tokens", "samples"])
@pytest.mark.parametrize("reuse_bytes", [REUSE_BYTES, 64])
def test_a_record_decoded_after_another_keeps_nothing_of_it(kind: Kind, reuse_bytes: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """One message parses a batch's records in turn (a new one after ``REUSE_BYTES``): the
    rows are those of each record decoded alone, a field one record lacks is not the last one's."""
    monkeypatch.setattr(columns, "REUSE_BYTES", reuse_bytes)
    full, bare = ((_doc(3), make_document([5], id="bare", vocab_size=10)) if kind == "tokens" else
                  (make_sample("a", id="s", source="f", targets=[1.0], metadata={"x": "y"}, timestamp_ms=5),
                   make_sample("b", id="t")))
    values = [m if isinstance(m, bytes) else m.SerializeToString() for m in (full, bare)] * 6
    records: list[Record] = [(0, i, i, None, value, ()) for i, value in enumerate(values)]
    together = RowMapper(kind).rows(_batch(*records)).to_pylist()
    assert together == [RowMapper(kind).rows(_batch(record)).to_pylist()[0] for record in records]


def test_samples_and_raw_tables() -> None:
    sample = make_sample("héllo", id="s1", source="f.txt", targets=[1.0, 2.0], metadata={"x": "y"},
                         timestamp_ms=5).SerializeToString()
    row = RowMapper("samples").rows(_batch((0, 0, 0, None, sample, ()))).to_pylist()[0]
    assert row["input_data"] == "héllo".encode() and row["source"] == "f.txt" and row["event_time_ms"] == 5
    assert record_value(row) == sample
    raw = RowMapper("raw").rows(_batch((0, 0, 0, None, sample, ()))).to_pylist()[0]
    assert raw["kind"] == "raw" and raw["value"] == sample and raw["input_data"] is None


def test_bytes_that_do_not_re_encode_are_kept() -> None:
    # A field written twice parses fine but re-encodes shorter: the original bytes are stored.
    doc = make_document([1], id="x", vocab_size=10)
    odd = doc.SerializeToString() + make_document([1], id="x", vocab_size=10).SerializeToString()[:3]
    row = RowMapper("tokens").rows(_batch((0, 0, 0, None, odd, ()))).to_pylist()[0]
    assert row["value"] == odd and record_value(row) == odd


def test_commit_plan_adds_only_what_the_table_lacks() -> None:
    batch = {0: (10, 20), 1: (5, 8), 2: (0, 4), 3: (30, 40)}
    expected: dict[int, int | None] = {0: 10, 1: 5, 2: None, 3: 30}
    # 0 unchanged; 1 archived by someone else up to 6; 2 archived past the batch; 3 rolled back.
    plan = plan_commit({0: 10, 1: 6, 2: 4, 3: 25, 7: 100}, expected, batch)
    assert plan.keep_from == {0: 10, 1: 6}
    assert plan.positions == {0: 20, 1: 8, 2: 4, 3: 25, 7: 100}
    assert plan.resync == {2: 4, 3: 25}
    # After our own commit landed but was reported failed, deciding again adds nothing.
    again = plan_commit(plan.positions, expected, batch)
    assert not again.adds_rows and again.positions == plan.positions


def test_positions_round_trip_and_refuse_garbage() -> None:
    assert decode_positions(encode_positions({2: 7, 0: 3}), "k") == {0: 3, 2: 7}
    with pytest.raises(ConfigError, match="position map"):
        decode_positions("[1, 2]", "k")


@pytest.mark.parametrize(("fields", "words"), [
    ({"topic": "bad topic", "table": "a.b"}, "not a Kafka topic"),
    ({"topic": "t", "table": "nodot"}, "NAMESPACE.TABLE"),
    ({"topic": "t", "table": "a.b", "flush_interval_s": 0}, "greater than 0"),
])
def test_settings_refuse_bad_values(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ArchiveSettings(**fields)  # type: ignore[arg-type]
