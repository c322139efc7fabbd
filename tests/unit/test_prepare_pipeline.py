from __future__ import annotations

from pathlib import Path

import pytest

from kafeed.errors import ConfigError
from kafeed.prepare import BatchPipeline, DedupState, PrepareSettings, load_prepare_settings, load_tokenizer
from kafeed.schema import decode_document, make_sample, unpack_tokens
from kafeed.schema.avro import encode_avro, format_headers
from kafeed.stream import Record, positions


def _rec(offset: int, value: bytes | None, *, partition: int = 0,
         headers: tuple[tuple[str, bytes], ...] = ()) -> Record:
    return Record(topic="raw", partition=partition, offset=offset, key=b"k%d" % offset, value=value,
                     headers=headers)


def _sample(text: str | bytes, id: str = "") -> bytes:
    return make_sample(text, id=id, source="unit", targets=[1.0], metadata={"m": "v"}).SerializeToString()


GOOD = "The quick brown fox jumps over the lazy dog near the river bank."


@pytest.mark.parametrize("overlap", [False, True])
def test_batch_accounting_balances(overlap: bool) -> None:
    settings = PrepareSettings(tokenizer={"overlap": overlap, "chunk_size": 2})  # type: ignore[arg-type]
    pipeline = BatchPipeline(settings, load_tokenizer())
    dedup = DedupState()
    avro = make_sample("Avro records are read through their header too.", id="av")
    records = [
        _rec(10, _sample(GOOD, "d1")),
        _rec(11, _sample("  " + GOOD + "  ", "d2")),              # duplicate after normalize
        _rec(12, _sample("too short", "d3")),                      # min_words
        _rec(13, b"\xff\xff\xff"),                                 # not a TrainingSample
        _rec(14, _sample(b"\xff\xfe bad utf8 bytes", "d5")),       # not UTF-8
        _rec(15, None),                                            # tombstone
        _rec(3, _sample(GOOD, "d7"), partition=1),                 # same text, other partition
        _rec(16, encode_avro(avro), headers=tuple(format_headers("avro"))),
    ]
    result = pipeline.run(records, dedup)
    c = result.counts
    assert c.records_in == 8
    assert (c.documents_out, c.duplicates, dict(c.filtered)) == (3, 1, {"min_words": 1})
    assert dict(c.dead_letter_kinds) == {"decode": 2, "encoding": 1}
    assert c.records_in == c.documents_out + sum(c.filtered.values()) + c.duplicates + c.dead_lettered
    assert positions(records) == {("raw", 0): 17, ("raw", 1): 4}
    assert sorted(p for p, _, _ in result.changelog) == [0, 0, 1]
    docs = [decode_document(d.value) for d in result.documents]
    assert [d.id for d in docs] == ["d1", "d7", "av"]
    first = docs[0]
    assert (first.input_topic, first.input_partition, first.input_offset) == ("raw", 0, 10)
    assert bytes(unpack_tokens(first.tokens, first.dtype).astype("u1")) == GOOD.encode()
    assert list(first.target_values) == [1.0] and dict(first.metadata) == {"m": "v"}
    assert c.tokens_out == sum(d.num_tokens for d in docs)

    dedup.rollback()  # an aborted transaction: the same batch again gives the same result
    again = pipeline.run(records, dedup)
    assert again.counts.documents_out == 3
    dedup.commit()
    assert pipeline.run(records[:1], dedup).counts.duplicates == 1
    pipeline.close()


def test_batch_changelog_format() -> None:
    from kafeed.prepare.dedup import content_hash, parse_changelog_record

    settings = PrepareSettings(dedup={"changelog_format": "batch"})  # type: ignore[arg-type]
    pipeline = BatchPipeline(settings, load_tokenizer())
    texts = [GOOD, GOOD + " Again.", GOOD + " Thrice."]
    records = [_rec(5 + i, _sample(t, f"d{i}")) for i, t in enumerate(texts)] + [
        _rec(9, _sample(GOOD, "o"), partition=2)]
    result = pipeline.run(records, DedupState())
    assert [(p, len(k)) for p, k, _ in result.changelog] == [(0, 12), (2, 12)]
    part, digests = parse_changelog_record(result.changelog[0][1], result.changelog[0][2])
    assert part == 0 and sorted(digests) == sorted(content_hash(t) for t in texts)
    with pytest.raises(ValueError):
        parse_changelog_record(result.changelog[0][1], b"x" * 17)


def test_oversized_document_goes_to_dlq() -> None:
    pipeline = BatchPipeline(PrepareSettings(), load_tokenizer(), max_message_bytes=50)
    result = pipeline.run([_rec(0, _sample(GOOD, "big"))], DedupState())
    assert result.documents == [] and dict(result.counts.dead_letter_kinds) == {"too_large": 1}


def test_settings_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "kafeed.toml"
    path.write_text('[prepare]\ninput = "in"\n[prepare.filters]\nmin_words = 5\n'
                    '[prepare.kafka]\nbatch_size = 10\n')
    s = load_prepare_settings(path, env={}, output="out", kafka={"linger_ms": 7, "batch_size": None})
    assert (s.input, s.output, s.filters.min_words, s.kafka.batch_size, s.kafka.linger_ms) == (
        ("in",), "out", 5, 10, 7)
    assert s.dlq_topic == "in.dlq" and s.changelog_topic == "__kafeed_dedup_kafeed-prepare"
    assert s.kafka.effective_message_timeout_ms() < s.kafka.transaction_timeout_ms
    with pytest.raises(ConfigError, match="message_timeout_ms"):
        load_prepare_settings(None, env={}, kafka={"message_timeout_ms": 70_000})
    with pytest.raises(ConfigError):
        load_prepare_settings(None, env={}, input="same", output="same")
    with pytest.raises(ConfigError):
        load_prepare_settings(None, env={}, filters={"min_wordz": 1})


FAN_OUT = [{"name": "code", "regex": r"^def \w+", "to": "tokens.code"},
           {"name": "english", "language": "en", "to": "tokens.en"},
           {"name": "german", "language": "de", "to": "drop"}]


def test_rules_send_each_document_to_its_first_matching_rule_before_tokenizing() -> None:
    from kafeed.route import parse_rules

    rules = parse_rules({"rule": FAN_OUT})
    settings = PrepareSettings(tokenizer={"chunk_size": 2})  # type: ignore[arg-type]
    pipeline = BatchPipeline(settings, load_tokenizer(), rules=rules)
    records = [
        _rec(0, _sample("def route(records): return the records that are in the list", "c")),
        _rec(1, _sample(GOOD, "e")),
        _rec(2, _sample("Der Hund ist nicht in dem Haus, und die Katze schläft auf dem Sofa.", "g")),
        _rec(3, _sample("Le chat est sur la table et il dort dans le salon avec les enfants.", "f")),
        _rec(4, _sample(GOOD, "dup")),                                   # duplicate: never routed
    ]
    result = pipeline.run(records, DedupState())
    c = result.counts
    where = {decode_document(o.value).id: o.topic for o in result.outputs}
    assert where == {"c": "tokens.code", "e": "tokens.en"}
    assert dict(c.routed) == {"code": 1, "english": 1, "german": 1} and c.dropped == 1
    assert [(d.record.offset, d.kind) for d in result.dead_letters] == [(3, "unrouted")]
    assert c.duplicates == 1 and c.documents_out == 2
    assert c.records_in == (c.documents_out + sum(c.filtered.values()) + c.duplicates + c.dropped
                            + c.dead_lettered)

    with_default = BatchPipeline(settings, load_tokenizer(),
                                 rules=parse_rules({"default": "tokens.other", "rule": FAN_OUT}))
    other = with_default.run(records, DedupState())
    assert {decode_document(o.value).id: o.topic for o in other.outputs}["f"] == "tokens.other"
    assert other.counts.routed["default"] == 1 and not other.dead_letters

