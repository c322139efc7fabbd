"""Quality filters on normalized text; each returns whether a document passes.

A document is dropped by the first filter it fails, in the order of
:data:`FILTER_NAMES`, and counted under that name. Words are whitespace-separated
tokens (as in Gopher). Thresholds and their sources: docs/prepare.md.
"""

from __future__ import annotations

from kafeed.prepare.settings import FilterSettings

_DEFAULT = FilterSettings()

FILTER_NAMES = (
    "min_chars",
    "max_chars",
    "min_words",
    "max_words",
    "mean_word_length",
    "symbol_ratio",
    "duplicate_lines",
)


def symbol_ratio(text: str, n_words: int) -> float:
    """Gopher's symbol-to-word ratio: ``#`` and ellipses ("..." or "…") per word."""
    if n_words == 0:
        return 0.0
    return (text.count("#") + text.count("...") + text.count("…")) / n_words


def duplicate_line_fraction(text: str) -> float:
    """Fraction of non-empty lines that repeat an earlier line (0 for fewer than two lines)."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        return 0.0
    return 1.0 - len(set(lines)) / len(lines)


def first_failed_filter(text: str, settings: FilterSettings | None = None) -> str | None:
    """The name of the first filter ``text`` fails, or None when it passes them all."""
    s = settings or _DEFAULT
    if not s.enabled:
        return None
    n_chars = len(text)
    if s.min_chars is not None and n_chars < s.min_chars:
        return "min_chars"
    if s.max_chars is not None and n_chars > s.max_chars:
        return "max_chars"
    words = text.split()
    n_words = len(words)
    if s.min_words is not None and n_words < s.min_words:
        return "min_words"
    if s.max_words is not None and n_words > s.max_words:
        return "max_words"
    if n_words and (s.min_mean_word_length is not None or s.max_mean_word_length is not None):
        mean = sum(map(len, words)) / n_words
        if s.min_mean_word_length is not None and mean < s.min_mean_word_length:
            return "mean_word_length"
        if s.max_mean_word_length is not None and mean > s.max_mean_word_length:
            return "mean_word_length"
    if s.max_symbol_ratio is not None and symbol_ratio(text, n_words) > s.max_symbol_ratio:
        return "symbol_ratio"
    if (s.max_duplicate_line_fraction is not None
            and duplicate_line_fraction(text) > s.max_duplicate_line_fraction):
        return "duplicate_lines"
    return None
