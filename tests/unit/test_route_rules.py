"""The rules engine without Kafka: parsing and its one-sentence errors, first-match order, counts."""

from __future__ import annotations

import pytest

from kafeed.errors import ConfigError
from kafeed.route import DROP, Router, detect_language, parse_rules
from kafeed.schema import make_sample
from kafeed.stream import Record

RULES = {
    "default": "other",
    "rule": [
        {"name": "short", "max_length": 12, "to": DROP},
        {"name": "code", "regex": r"^\s*(def|class) \w+", "to": "code"},
        {"name": "wiki-en", "source": "wiki", "language": "en", "to": "en.wiki"},
        {"name": "english", "language": ["en"], "to": "en"},
        {"name": "tagged", "metadata": {"lang": ["de", "fr"]}, "header": {"route": True}, "to": "tagged"},
        {"name": "positive", "label": 1, "min_length": 20, "to": "pos"},
    ],
}

EN = "The cat sat on the mat and it was happy with the warm sun."
DE = "Der Hund ist nicht in dem Haus, und die Katze schläft auf dem Sofa."


def _record(text: str | bytes, offset: int = 0, *, source: str = "", label: float | None = None,
            metadata: dict[str, str] | None = None, headers: tuple[tuple[str, bytes], ...] = ()) -> Record:
    sample = make_sample(text, id=f"d{offset}", source=source, metadata=metadata,
                         targets=[label] if label is not None else [])
    return Record("raw", 0, offset, f"k{offset}".encode(), sample.SerializeToString(), headers)


def test_first_matching_rule_wins_and_every_record_is_counted_once() -> None:
    router = Router(parse_rules(RULES))
    records = [
        _record("tiny", 0),                                     # short (before everything)
        _record("def main():\n    return the_answer()", 1),     # code, although English words
        _record(EN, 2, source="wiki"),                          # wiki-en before english
        _record(EN, 3, source="news"),                          # english
        _record(DE, 4, metadata={"lang": "de"}, headers=(("route", b"x"),)),  # tagged
        _record(DE, 5, metadata={"lang": "de"}),                # tagged needs the header: falls on
        _record(DE + " positive", 6, label=1.0),                # positive (German, so not english)
        _record(b"\xff\xfe not utf-8", 7),                      # encoding: dead letter
        Record("raw", 0, 8, None, b"\x0a\xff\xff", ()),          # no sample at all: decode
    ]
    batch = router.run(records)
    where = {int(o.key.decode()[1:]): o.topic for o in batch.all_outputs() if o.key}
    assert where == {1: "code", 2: "en.wiki", 3: "en", 4: "tagged", 5: "other", 6: "pos"}
    assert batch.dropped == 1
    assert sorted(d.kind for d in batch.dead_letters) == ["decode", "encoding"]
    assert dict(batch.by_rule) == {"short": 1, "code": 1, "wiki-en": 1, "english": 1, "tagged": 1,
                                   "default": 1, "positive": 1}
    assert sum(batch.by_rule.values()) + len(batch.dead_letters) == len(records)
    routed = next(o for o in batch.all_outputs() if o.topic == "tagged")
    assert routed.value == records[4].value and routed.headers == records[4].headers  # unchanged


def test_without_a_default_the_unmatched_are_dead_letters_with_a_reason() -> None:
    router = Router(parse_rules({"rule": [{"source": "wiki", "to": "wiki"}]}))
    batch = router.run([_record(EN, 0, source="news")])
    assert not batch.all_outputs()
    assert [(d.kind, d.reason) for d in batch.dead_letters] == [
        ("unrouted", "no rule matched and there is no default topic")]


@pytest.mark.parametrize(("doc", "says"), [
    ({"rule": [{"to": "a", "lang": "en"}]}, "unknown key 'lang'"),
    ({"rule": [{"to": "a", "regex": "(unclosed"}]}, "does not compile"),
    ({"rule": [{"name": "x", "source": "s"}]}, "has no `to`"),
    ({"rule": [{"to": "not a topic!"}]}, "is not a topic name"),
    ({"rule": [{"to": "a", "language": "xx"}]}, "language 'xx' is not one the detector knows"),
    ({"rule": [{"to": "a", "min_length": -1}]}, "min_length must be"),
    ({"rule": [{"to": "a", "min_length": 5, "max_length": 2}]}, "can never match"),
    ({"rule": [{"to": "a", "metadata": "lang"}]}, "metadata must be a table"),
    ({"rule": [{"name": "n", "to": "a"}, {"name": "n", "to": "b"}]}, "same name"),
    ({"rules": []}, "unknown key 'rules'"),
    ({}, "has no [[rule]] table"),
])
def test_bad_rules_are_one_sentence(doc: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rules(doc)
    assert says in err.value.message and "\n" not in err.value.message


def test_topics_lists_each_output_once_in_order() -> None:
    assert parse_rules(RULES).topics == ("code", "en.wiki", "en", "tagged", "pos", "other")


@pytest.mark.parametrize(("text", "language"), [
    (EN, "en"), (DE, "de"),
    ("Le chat est sur la table et il dort dans le salon avec les enfants.", "fr"),
    ("El perro de la casa está en el jardín con los niños y la madre.", "es"),
    ("Кошка сидит на окне и смотрит на улицу.", "ru"),
    ("猫がテーブルの上で寝ています。", "ja"),
    ("猫在桌子上睡觉。", "zh"),
    ("12345 67890", "und"),
    ("", "und"),
])
def test_language_detector(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_language_detector_reads_ascii_text_as_the_unicode_scan_does() -> None:
    # Lower-cased ASCII text takes a faster word scan; an appended Latin non-ASCII word
    # forces the Unicode scan without changing the answer, so both must agree.
    import random

    rng = random.Random(7)
    words = ["the", "and", "der", "die", "und", "le", "la", "de", "el", "il", "o", "a", "het", "een",
             "is", "que", "x", "River", "Stadt", "123", "it's", "co-op"]
    for _ in range(500):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 14)))
        assert detect_language(text) == detect_language(text + " \u00e9t\u00e9"), text
