from __future__ import annotations

import json
from collections import Counter

import pytest

from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, run_prepare
from kafeed.schema import decode_document, make_sample, unpack_tokens
from kafeed.schema.avro import encode_avro, format_headers
from tests.prepare_support import document_ids, paragraphs, produce, read_topic, sample_record


def _settings(raw: str, group: str, **kw: object) -> PrepareSettings:
    return PrepareSettings(input=raw, output=f"{raw}.tokens", group=group, idle_s=1.0,
                           kafka={"batch_size": 50, "transaction_timeout_ms": 10_000}, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("changelog_format", ["hash", "batch"])
def test_prepare_dedups_filters_and_dead_letters(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                                 changelog_format: str) -> None:
    raw = make_topic(partitions=3)
    good = paragraphs(40)
    records = [sample_record(t) for t in good]
    records += [sample_record(t) for t in good[:7]]            # 7 exact duplicates
    # a duplicate only after normalization, keyed by the same document id
    variant = "  " + good[3].replace(" ", " \t ") + "\r\n"
    records += [sample_record(variant, key=sample_record(good[3])[0].decode())]
    records += [sample_record("Hi"), sample_record("Read more... and more... and more... now"),
                sample_record("same line here\nsame line here\nsame line here")]
    bad = [(b"garbage", b"\xff\xff\xff", None),
           (b"latin1", make_sample(b"caf\xe9 au lait is good", id="latin1").SerializeToString(), None),
           (b"tombstone", None, None)]
    # One Avro-encoded sample, told apart by its kafeed.format header.
    avro_text = paragraphs(1, seed="avro")[0]
    avro_value = encode_avro(make_sample(avro_text, id="avro-doc"))
    records += [(b"avro-doc", avro_value, format_headers("avro"))]
    produce(kafka, raw, records + bad)

    settings = _settings(raw, f"g-{raw}", dedup={"changelog_format": changelog_format})
    stats = run_prepare(settings, kafka, until_caught_up=True)

    assert stats.balanced, stats
    assert stats.records_in == len(records) + len(bad)
    assert stats.documents_out == 41
    assert stats.duplicates == 8
    assert stats.filtered == {"min_words": 1, "symbol_ratio": 1, "duplicate_lines": 1}
    assert stats.dead_lettered == 3
    out = read_topic(kafka, settings.output)
    ids = document_ids(out)
    assert len(ids) == len(set(ids)) == 41 and "avro-doc" in ids
    doc = decode_document(out[0].value())
    assert doc.tokenizer.startswith("bytes:") and doc.input_topic == raw
    assert 256 not in unpack_tokens(doc.tokens, doc.dtype)  # the loader adds end-of-document ids
    dlq = read_topic(kafka, settings.dlq_topic)
    kinds = Counter(dict(m.headers())["kafeed.error.kind"] for m in dlq)
    assert kinds == {b"decode": 2, b"encoding": 1}
    assert all(dict(m.headers())["kafeed.error.reason"] for m in dlq)
    assert {dict(m.headers())["kafeed.source.topic"] for m in dlq} == {raw.encode()}

    # A restart remembers: the same texts again are all duplicates, a new one passes.
    produce(kafka, raw, [sample_record(t) for t in good[:5]] + [sample_record(paragraphs(1, seed="new")[0])])
    again = run_prepare(settings, kafka, until_caught_up=True)
    assert (again.records_in, again.duplicates, again.documents_out) == (6, 5, 1)
    assert len(read_topic(kafka, settings.output)) == 42


def test_cli_summary_and_errors(kafka: ConnectionSettings, make_topic, capsys, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from kafeed.cli.main import main

    monkeypatch.setenv("KAFEED_HOME", str(tmp_path))
    raw = make_topic(partitions=1)
    produce(kafka, raw, [sample_record(t) for t in paragraphs(5)] + [sample_record("Hi")])
    config = tmp_path / "kafeed.toml"
    config.write_text("[prepare]\nidle_s = 1.0\n[prepare.filters]\nmin_words = 1\n")
    code = main(["prepare", "-b", kafka.bootstrap, "-i", raw, "-o", f"{raw}.tokens", "-g", f"g-{raw}",
                 "--config", str(config), "--until-caught-up"])
    out = capsys.readouterr().out
    assert code == 0
    assert "balanced" in out and "documents out" in out
    # The settings file's min_words = 1 lets "Hi" past min_words; mean word length stops it.
    assert "filtered: mean_word_length" in out and "min_words" not in out
    assert main(["prepare", "-b", kafka.bootstrap, "-i", "no-such-topic", "--until-caught-up"]) == 1
    assert main(["prepare", "-b", kafka.bootstrap, "--batch-size", "0"]) == 2


def test_transactional_input_is_caught_up(kafka: ConnectionSettings, make_topic) -> None:  # type: ignore[no-untyped-def]
    """A raw topic written in transactions (as ingest does) ends with a commit marker; still caught up."""
    import logging
    import threading

    from confluent_kafka import Producer

    raw = make_topic(partitions=1)
    producer = Producer(kafka.client_config() | {
        "transactional.id": f"writer-{raw}", "logger": logging.getLogger("kafeed.librdkafka")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, value, _ in [sample_record(t) for t in paragraphs(10)]:
        producer.produce(raw, key=key, value=value)
    producer.commit_transaction(30)
    stop = threading.Event()
    timer = threading.Timer(60, stop.set)
    timer.start()
    try:
        stats = run_prepare(_settings(raw, f"g-{raw}"), kafka, until_caught_up=True, stop_event=stop)
    finally:
        timer.cancel()
    assert not stop.is_set(), "prepare never saw itself caught up"
    assert stats.documents_out == 10


def test_a_new_group_into_an_output_that_holds_its_input_is_refused(  # type: ignore[no-untyped-def]
        kafka: ConnectionSettings, make_topic, capsys) -> None:
    from kafeed.cli.main import main
    from tests.cli_support import usage_error

    raw = make_topic(partitions=2)
    produce(kafka, raw, [sample_record(t) for t in paragraphs(8)])
    tokens = f"{raw}.tokens"
    args = ["prepare", "-b", kafka.bootstrap, "-i", raw, "-o", tokens, "--until-caught-up", "--json"]
    assert main([*args, "-g", f"first-{raw}"]) == 0
    capsys.readouterr()
    written = len(read_topic(kafka, tokens))
    assert written > 0
    # The same group again: a resume, nothing new, not refused.
    assert main([*args, "-g", f"first-{raw}"]) == 0
    assert json.loads(capsys.readouterr().out)["records_in"] == 0
    # A new group: refused before anything is read or written, naming the output and the input.
    line = usage_error([*args, "-g", f"second-{raw}"], capsys)
    assert f"Topic '{tokens}' already holds documents prepared from '{raw}'" in line
    assert len(read_topic(kafka, tokens)) == written
    # Asked for: written again.
    assert main([*args, "-g", f"second-{raw}", "--reprocess"]) == 0
    capsys.readouterr()
    assert len(read_topic(kafka, tokens)) == 2 * written
