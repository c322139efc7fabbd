"""Value formats: the field mapping's rules, ids, the [formats] table, and each stage's decode of a
JSON or text topic (prepare, route, infer's texts, archive rows, the samples loader)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafeed.archive.rows import RecordBatch as ArchiveBatch
from kafeed.archive.rows import RowMapper, record_value
from kafeed.errors import ConfigError, SchemaError
from kafeed.formats import Decoders, FormatSettings, Rejected, load_formats
from kafeed.formats.registry import JsonFormat, TextFormat
from kafeed.formats.settings import TopicFormat
from kafeed.infer.predict import PredictionBatch, _texts
from kafeed.loader.nodes.record_kinds import parse_as
from kafeed.prepare.decode import decode_batch
from kafeed.route import parse_rules
from kafeed.route.engine import Router
from kafeed.schema import make_sample
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import Record

JSON = TopicFormat(format="json", label_field="label", meta_fields=("lang", "a.b"))


def _json(obj: object, fmt: TopicFormat = JSON, offset: int = 7) -> TrainingSample | Rejected:
    got = JsonFormat(fmt).decode(json.dumps(obj).encode(), (), "t", 2, offset, 99)
    if isinstance(got, Rejected):
        return got
    sample, text = got
    assert text.encode() == sample.input_data
    return sample


def test_a_json_object_maps_as_ingest_maps_a_row() -> None:
    sample = _json({"text": "hello there", "id": 5, "label": [1, "2.5"], "lang": "en", "a": {"b": 3}})
    assert isinstance(sample, TrainingSample)
    assert (sample.input_data, sample.id, list(sample.target_values)) == (b"hello there", "5", [1.0, 2.5])
    assert dict(sample.metadata) == {"lang": "en", "a.b": "3"}
    assert sample.source == "t" and sample.timestamp == 99


@pytest.mark.parametrize(("obj", "kind"), [
    ({"label": 1}, "missing_text"),
    ({"text": None, "label": 1}, "null_text"),
    ({"text": 3, "label": 1}, "text_not_string"),
    ({"text": "  ", "label": 1}, "empty_text"),
    ({"text": "a\x00b", "label": 1}, "binary_content"),
    ({"text": "ok", "id": 1.5, "label": 1}, "bad_id"),
    ({"text": "ok"}, "missing_label"),
    ({"text": "ok", "label": "x"}, "bad_label"),
    ({"text": "ok", "label": True}, "bad_label"),
    ([1, 2], "decode"),
])
def test_a_record_that_does_not_map_is_rejected_with_ingests_kind(obj: object, kind: str) -> None:
    got = _json(obj)
    assert isinstance(got, Rejected) and got.kind == kind, got


def test_values_that_are_no_json_and_tombstones_are_decode_dead_letters() -> None:
    fmt = JsonFormat(JSON)
    deep = b"[" * 100_000 + b"]" * 100_000
    for value in (b"{nope", b"\xff\xfe", None, b'{"text": "a", "label": 1} trailing', b"", deep):
        got = fmt.decode(value, (), "t", 0, 1, 0)
        assert isinstance(got, Rejected) and got.kind == "decode" and "t/0@1" in got.reason


def test_whitespace_around_a_json_object_is_json() -> None:
    got = JsonFormat(JSON).decode(b' \n {"text": "spaced out", "label": 1} \n', (), "t", 0, 0, 0)
    assert not isinstance(got, Rejected) and got[1] == "spaced out"


def test_nested_paths_read_a_debezium_envelope_and_a_dotted_key_first() -> None:
    fmt = TopicFormat(format="json", text_field="after.body", id_field="after.id")
    sample = _json({"before": None, "after": {"id": 12, "body": "the row"}, "op": "c"}, fmt)
    assert isinstance(sample, TrainingSample) and sample.id == "12" and sample.input_data == b"the row"
    assert isinstance(_json({"after.body": "flat key", "after": {"body": "x"}}, fmt), TrainingSample)
    assert _json({"after.body": "flat key"}, fmt).input_data == b"flat key"  # type: ignore[union-attr]
    deleted = _json({"before": {"id": 12}, "after": None, "op": "d"}, fmt)
    assert isinstance(deleted, Rejected) and deleted.kind == "missing_text"


def test_a_record_without_an_id_is_named_by_where_it_lies() -> None:
    a, b = _json({"text": "same", "label": 0}, offset=3), _json({"text": "same", "label": 0}, offset=4)
    assert isinstance(a, TrainingSample) and isinstance(b, TrainingSample)
    assert (a.id, b.id) == ("t/2@3", "t/2@4")
    text = TextFormat(TopicFormat(format="text")).decode(b"a line of text", (), "logs", 1, 9, 5)
    assert not isinstance(text, Rejected) and text[1] == "a line of text"
    assert text[0].id == "logs/1@9" and text[0].input_data == b"a line of text"


def test_text_that_is_not_utf8_is_an_encoding_dead_letter() -> None:
    got = TextFormat(TopicFormat(format="text")).decode(b"\xff bad", (), "logs", 0, 0, 0)
    assert isinstance(got, Rejected) and got.kind == "encoding"


def test_the_table_names_topics_and_globs_and_the_flags_apply_over_it(tmp_path: Path) -> None:
    config = tmp_path / "k.toml"
    config.write_text('[formats.events]\nformat = "json"\nlabel_field = "y"\n'
                      '[formats."logs-*"]\nformat = "text"\n')
    table = load_formats(config)
    assert table.of("events").label_field == "y" and table.of("logs-web").format == "text"
    assert table.of("raw").format == "kafeed" and table.of("__kafeed_x").format == "kafeed"
    flagged = load_formats(config, format="json", text_field="body", meta_fields=["m"])
    assert flagged.of("events") == TopicFormat(format="json", text_field="body", label_field="y",
                                               meta_fields=("m",))
    assert flagged.of("raw").format == "json"
    with pytest.raises(ConfigError, match="value formats"):
        load_formats(table={"events": {"format": "xml"}})
    with pytest.raises(ConfigError, match="value formats"):
        load_formats(table={"events": {"text_feld": "body"}})


def test_decoders_pick_each_topics_format() -> None:
    decoders = Decoders(FormatSettings(topics={"j": JSON}))
    assert not decoders.only_kafeed and decoders.is_kafeed("raw") and not decoders.is_kafeed("j")
    assert Decoders().only_kafeed
    kafeed = make_sample("kafeed's own", id="k1").SerializeToString()
    got = decoders.decode(kafeed, (), "raw", 0, 0)
    assert not isinstance(got, Rejected) and got[0].id == "k1" and got[1] == "kafeed's own"
    assert isinstance(decoders.decode(kafeed, (), "j", 0, 0), Rejected)  # protobuf bytes are no JSON


def _records() -> list[Record]:
    good = [Record("j", 0, i, None, json.dumps({"text": f"doc {i} here", "label": i % 2}).encode(), (), 50)
            for i in range(5)]
    return [*good, Record("j", 0, 5, None, b"{bad", (), 50), Record("j", 0, 6, None, b'{"label": 1}', (), 50)]


def test_prepare_decodes_a_json_topic_and_dead_letters_the_rest() -> None:
    result = decode_batch(_records(), Decoders(FormatSettings(topics={"j": JSON})))
    assert [d.text for d in result.decoded] == [f"doc {i} here" for i in range(5)]
    assert [d.sample.id for d in result.decoded] == [f"j/0@{i}" for i in range(5)]
    assert [(r.record.offset, r.kind) for r in result.rejected] == [(5, "decode"), (6, "missing_text")]
    # Without the format, the same records are no TrainingSample.
    assert len(decode_batch(_records()).rejected) >= 5


def test_route_reads_a_json_topic_by_its_format_and_keeps_the_bytes() -> None:
    rules = parse_rules({"default": "other", "rule": [{"name": "one", "label": [1], "to": "ones"}]})
    routed = Router(rules, Decoders(FormatSettings(topics={"j": JSON}))).run(_records())
    assert sorted(r.kind for r in routed.dead_letters) == ["decode", "missing_text"]
    assert routed.by_rule == {"one": 2, "default": 3}
    # mixed with kafeed's own records in one batch: those still take the scan
    own = Record("raw", 0, 0, None, make_sample("own text", id="o", targets=[1.0]).SerializeToString())
    mixed = Router(rules, Decoders(FormatSettings(topics={"j": JSON}))).run([own, *_records()])
    assert mixed.by_rule == {"one": 3, "default": 3} and len(mixed.dead_letters) == 2


def test_archive_rows_of_a_json_topic_keep_the_producers_bytes() -> None:
    batch = ArchiveBatch("j")
    for r in _records():
        batch.add(r.partition, r.offset, r.timestamp_ms, r.key, r.value)
    rows = RowMapper("samples", JsonFormat(JSON)).rows(batch).to_pylist()
    assert [r["kind"] for r in rows] == ["TrainingSample"] * 5 + ["raw", "raw"]
    assert rows[1]["id"] == "j/0@1" and rows[1]["targets"] == [1.0] and rows[1]["event_time_ms"] == 50
    assert [record_value(r) for r in rows] == [r.value for r in _records()]


def test_the_samples_loader_parses_a_json_topic_and_names_a_bad_record() -> None:
    fmt = JsonFormat(JSON)
    payload, _ = parse_as(fmt, b'{"text": "x y", "label": 1}', ("j", 0, 4), 77)
    assert payload["id"] == "j/0@4" and payload["input"] == b"x y" and payload["targets"].tolist() == [1.0]
    assert payload["timestamp"] == 77 and payload["source"] == "j"
    with pytest.raises(SchemaError, match=r"j/0@5.*missing_label"):
        parse_as(fmt, b'{"text": "x y"}', ("j", 0, 5), 0)


def test_infer_reads_a_json_topics_texts_and_ids() -> None:
    out = PredictionBatch()
    kept, texts, ids = _texts(_records(), out, Decoders(FormatSettings(topics={"j": JSON})))
    assert texts == [f"doc {i} here" for i in range(5)] and ids == [f"j/0@{i}" for i in range(5)]
    assert [r.offset for r in kept] == list(range(5))
    assert [(d.record.offset, d.kind) for d in out.dead_letters] == [(5, "decode"), (6, "missing_text")]
