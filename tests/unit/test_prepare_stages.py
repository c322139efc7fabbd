from __future__ import annotations

import pytest

from kafeed.prepare import FilterSettings, NormalizeSettings, first_failed_filter, normalize_text
from kafeed.prepare.filters import duplicate_line_fraction, symbol_ratio


@pytest.mark.parametrize(("raw", "expected"), [
    ("cafe\u0301", "café"),                      # NFC composes
    ("a\x00b\x07c\x7fd\x85e", "abcde"),          # C0, DEL and C1 controls go
    ("line one\r\nline two", "line one\nline two"),
    ("a \t  b\u00a0\u2003c", "a b c"),           # horizontal whitespace runs → one space
    ("  padded  \n  ", "padded"),
    ("a \n b", "a\nb"),
    ("a\n\n\n\n\nb", "a\n\nb"),                  # at most one blank line
    ("tab\tkept?", "tab kept?"),                 # \t is not stripped, but collapses to a space
    ("", ""),
])
def test_normalize(raw: str, expected: str) -> None:
    assert normalize_text(raw) == expected


def test_normalize_options() -> None:
    assert normalize_text("a\n\n\n\nb", NormalizeSettings(max_blank_lines=2)) == "a\n\n\nb"
    assert normalize_text(" x\x00 ", NormalizeSettings(enabled=False)) == " x\x00 "
    assert normalize_text("ﬁ", NormalizeSettings(form="NFKC")) == "fi"


def test_defaults_pass_an_ordinary_paragraph() -> None:
    text = "First Citizen:\nBefore we proceed any further, hear me speak."
    assert first_failed_filter(text) is None


@pytest.mark.parametrize(("settings", "text", "failed"), [
    (FilterSettings(min_chars=5), "abcd", "min_chars"),
    (FilterSettings(min_chars=5, min_words=1), "abcde", None),
    (FilterSettings(max_chars=5, min_words=1), "abcdef", "max_chars"),
    (FilterSettings(max_chars=6, min_words=1), "abcdef", None),
    (FilterSettings(), "two words", "min_words"),
    (FilterSettings(), "three words here", None),
    (FilterSettings(max_words=3), "four words are here", "max_words"),
    (FilterSettings(max_words=4), "four words are here", None),
    (FilterSettings(), "abc abc ab", "mean_word_length"),          # mean 2.67 < 3
    (FilterSettings(), "abc abc abc", None),                        # mean exactly 3
    (FilterSettings(), "abcdefghij abcdefghij abcdefghij", None),   # mean exactly 10
    (FilterSettings(), "abcdefghijk abcdefghij abcdefghij", "mean_word_length"),
    (FilterSettings(), "#tag word word word word word word word word word", None),     # 1/10 = 0.1
    (FilterSettings(), "#tag word... word word word word word word word word", "symbol_ratio"),
    (FilterSettings(), "one two three\none two three\nfour five six\nseven eight nine", None),
    (FilterSettings(), "one two three\none two three\none two three\nfour five six", "duplicate_lines"),
    (FilterSettings(enabled=False), "", None),
    (FilterSettings(min_chars=None, min_words=None), "", None),
])
def test_filter_boundaries(settings: FilterSettings, text: str, failed: str | None) -> None:
    assert first_failed_filter(text, settings) == failed


def test_filter_measures() -> None:
    assert symbol_ratio("# ... … word", 4) == 0.75
    assert symbol_ratio("", 0) == 0.0
    assert duplicate_line_fraction("a\na\na\nb") == 0.5
    assert duplicate_line_fraction("a\n\n\nb") == 0.0
    assert duplicate_line_fraction("single") == 0.0


def test_filter_order_names_the_first_failure() -> None:
    # Fails min_words and mean_word_length; counted under the first.
    assert first_failed_filter("a b") == "min_words"


def _normalize_reference(text: str) -> str:
    """The plain form of the rules: every whitespace run replaced, every newline's spaces dropped."""
    import re
    import unicodedata

    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]+", "", text)
    text = re.sub(r"[^\S\n]+", " ", text)
    text = re.sub(r" ?\n ?", "\n", text)
    text = re.sub("\n{3,}", "\n\n", text)  # at most one blank line
    return text.strip()


def test_normalize_matches_the_plain_rules_on_random_text() -> None:
    import random

    rng = random.Random(7)
    alphabet = list("ab.# \n\t\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000\x00e\u0301\u00e9")
    for _ in range(20_000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert normalize_text(raw) == _normalize_reference(raw), repr(raw)


def test_global_busy_time_spans_both_steps() -> None:
    from kafeed.prepare.stats import BatchCounts, PrepareStats
    from kafeed.stream import StreamStats

    route, dedup = StreamStats(records_in=10, busy_s=2.0), StreamStats(records_in=9, busy_s=3.0)
    steps = ((BatchCounts(), route), (BatchCounts(), dedup))
    assert PrepareStats.of_steps(*steps).busy_s == 3.0
    assert PrepareStats.of_steps(*steps, busy_s=4.5).busy_s == 4.5
