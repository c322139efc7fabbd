from __future__ import annotations

import hashlib
import math

import pytest

from kafeed.errors import ResumeMismatch
from kafeed.ingest import IngestOptions, content_id, job_id_for
from kafeed.ingest.mapping import Mapper, Rejected, parse_labels
from kafeed.ingest.progress import JobProgress
from kafeed.schema import decode_avro, decode_sample


def _map(fields: dict[str, object], **opts: object) -> tuple[str, bytes] | Rejected:
    mapper = Mapper(IngestOptions(**opts), max_value_bytes=1000)  # type: ignore[arg-type]
    return mapper.map(fields, source="f.jsonl", where_key="kafeed.line", where=7, timestamp_ms=5)


def test_content_id_is_truncated_sha256() -> None:
    assert content_id("héllo") == hashlib.sha256("héllo".encode()).hexdigest()[:32]
    assert len(content_id("x", 12)) == 12


def test_good_row_maps_id_labels_meta_and_lineage() -> None:
    doc_id, value = _map({"doc": "d-1", "body": "text here", "y": [1, "2.5"], "lang": "en", "n": 3},
                         text_field="body", id_field="doc", label_field="y",
                         meta_fields=("lang", "n", "gone"))
    assert doc_id == "d-1" and isinstance(value, bytes)
    s = decode_sample(value)
    assert s.input_data == b"text here" and s.id == "d-1" and s.source == "f.jsonl" and s.timestamp == 5
    assert list(s.target_values) == [1.0, 2.5]
    assert dict(s.metadata) == {"kafeed.source": "f.jsonl", "kafeed.line": "7", "lang": "en", "n": "3"}


def test_missing_id_is_content_hash_and_int_id_is_string() -> None:
    assert _map({"text": "abc"})[0] == content_id("abc")
    assert _map({"text": "abc", "id": ""})[0] == content_id("abc")
    assert _map({"text": "abc", "id": 42})[0] == "42"


def test_avro_format_encodes_avro() -> None:
    _, value = _map({"text": "abc", "id": "x"}, format="avro")
    assert isinstance(value, bytes) and decode_avro(value).id == "x"


@pytest.mark.parametrize(("fields", "opts", "kind"), [
    ({"body": "x"}, {}, "missing_text"),
    ({"text": None}, {}, "null_text"),
    ({"text": 5}, {}, "text_not_string"),
    ({"text": ["a"]}, {}, "text_not_string"),
    ({"text": ""}, {}, "empty_text"),
    ({"text": " \t\n"}, {}, "empty_text"),
    ({"text": "a\x00b"}, {}, "binary_content"),
    ({"text": "a\udcff"}, {}, "invalid_utf8"),
    ({"text": "a", "id": {"x": 1}}, {}, "bad_id"),
    ({"text": "a", "id": True}, {}, "bad_id"),
    ({"text": "a"}, {"label_field": "y"}, "missing_label"),
    ({"text": "a", "y": "high"}, {"label_field": "y"}, "bad_label"),
    ({"text": "a", "y": math.nan}, {"label_field": "y"}, "bad_label"),
    ({"text": "a", "y": "inf"}, {"label_field": "y"}, "bad_label"),
    ({"text": "a", "y": [1, None]}, {"label_field": "y"}, "bad_label"),
    ({"text": "a", "y": True}, {"label_field": "y"}, "bad_label"),
    ({"text": "x" * 2000}, {}, "oversize"),
])
def test_rejections(fields: dict[str, object], opts: dict[str, object], kind: str) -> None:
    result = _map(fields, **opts)
    assert isinstance(result, Rejected) and result.kind == kind and result.reason


def test_parse_labels() -> None:
    assert parse_labels(3) == [3.0]
    assert parse_labels(["1e3", 2]) == [1000.0, 2.0]
    rejected = parse_labels(-math.inf)
    assert isinstance(rejected, Rejected) and rejected.kind == "bad_label"


def test_job_id_depends_on_topic_sources_and_mapping() -> None:
    base = job_id_for("raw", ["a.jsonl"], IngestOptions())
    assert base == job_id_for("raw", ["a.jsonl"], IngestOptions())
    assert base.startswith("ingest-")
    assert base != job_id_for("raw2", ["a.jsonl"], IngestOptions())
    assert base != job_id_for("raw", ["b.jsonl"], IngestOptions())
    assert base != job_id_for("raw", ["a.jsonl"], IngestOptions(text_field="body"))
    assert base == job_id_for("raw", ["a.jsonl"], IngestOptions(linger_ms=5))  # tuning is not identity
    assert job_id_for("raw", ["a.jsonl"], IngestOptions(job_id="mine")) == "mine"
    assert job_id_for("raw", ["-"], IngestOptions()) != job_id_for("raw", ["-"], IngestOptions())
    assert job_id_for("raw", ["-"], IngestOptions(job_id="s")) == "s"


def test_progress_state_round_trip_and_mismatch() -> None:
    p = JobProgress(job="j", sources=["/a|1|2"], index=0, offset=10, record=3)
    back = JobProgress.from_state_dict(p.state_dict())
    assert (back.index, back.offset, back.record, back.sources) == (0, 10, 3, ["/a|1|2"])
    back.check_sources(["/a|1|2"])
    with pytest.raises(ResumeMismatch, match="changed or new: /a"):
        back.check_sources(["/a|5|6"])
    with pytest.raises(ResumeMismatch, match="version"):
        JobProgress.from_state_dict({**p.state_dict(), "version": 99})


@pytest.mark.parametrize("size", [1, 127, 128, 300, 20_000])
def test_wire_encoding_matches_the_protobuf_library(size: int) -> None:
    from kafeed.schema import make_sample

    text = ("é" * size)[:size]
    mapper = Mapper(IngestOptions(label_field="y", meta_fields=("lang",)), max_value_bytes=10**6)
    fields = {"text": text, "id": "x" * (size % 200 + 1), "y": [0.25, -3], "lang": "fr"}
    doc_id, value = mapper.map(fields, source="dir/ü.jsonl", where_key="kafeed.line", where=123456,
                               timestamp_ms=1_732_000_000_000)
    assert isinstance(value, bytes)
    expected = make_sample(text, id=doc_id, source="dir/ü.jsonl", targets=[0.25, -3.0],
                           metadata={"kafeed.source": "dir/ü.jsonl", "kafeed.line": "123456",
                                     "lang": "fr"},
                           timestamp_ms=1_732_000_000_000)
    assert decode_sample(value) == expected
