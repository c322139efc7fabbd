"""A small offline language guess: writing system first, then stop words for Latin script.

Good enough to send English to one topic and German to another; not a replacement
for a trained identifier on short or mixed texts. Returns an ISO 639-1 code, or
``"und"`` (undetermined) when the text gives too little to go on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

#: The most frequent function words of each Latin-script language (top of their
#: frequency lists), few enough that one text rarely scores in two languages by chance.
_STOP_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset([
        "the", "and", "of", "to", "in", "is", "that", "it", "was", "for", "with", "as", "on", "be",
        "at", "by", "this", "are", "not", "have"
    ]),
    "de": frozenset([
        "der", "die", "und", "das", "ist", "nicht", "ein", "eine", "zu", "den", "von", "mit", "sich",
        "des", "auf", "für", "dem", "im"
    ]),
    "fr": frozenset([
        "le", "la", "les", "et", "des", "est", "une", "un", "du", "que", "pour", "dans", "qui", "pas",
        "sur", "au", "avec", "ce", "il"
    ]),
    "es": frozenset([
        "el", "la", "los", "las", "y", "que", "de", "en", "es", "una", "por", "con", "para", "del",
        "se", "no", "al", "lo", "como"
    ]),
    "it": frozenset([
        "il", "di", "che", "è", "la", "per", "una", "sono", "non", "gli", "del", "della", "con", "le",
        "si", "da", "un", "nel"
    ]),
    "pt": frozenset([
        "o", "a", "os", "que", "de", "não", "uma", "um", "para", "com", "do", "da", "em", "é", "no",
        "na", "se", "por"
    ]),
    "nl": frozenset([
        "de", "het", "een", "en", "van", "is", "dat", "niet", "op", "te", "zijn", "met", "voor", "die",
        "er", "aan", "ook"
    ]),
}

#: Writing systems that name their language (or one language family member) alone.
_SCRIPTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ja", re.compile(r"[\u3040-\u30ff]")),        # kana: Japanese even when kanji dominate
    ("ko", re.compile(r"[\uac00-\ud7af]")),        # hangul
    ("zh", re.compile(r"[\u4e00-\u9fff]")),        # han without kana
    ("ru", re.compile(r"[\u0400-\u04ff]")),        # cyrillic
    ("el", re.compile(r"[\u0370-\u03ff]")),        # greek
    ("ar", re.compile(r"[\u0600-\u06ff]")),        # arabic
    ("he", re.compile(r"[\u0590-\u05ff]")),        # hebrew
    ("hi", re.compile(r"[\u0900-\u097f]")),        # devanagari
    ("th", re.compile(r"[\u0e00-\u0e7f]")),        # thai
)

_WORD = re.compile(r"[^\W\d_]+")
_ASCII_WORD = re.compile(r"[a-z]+")  # _WORD on lower-cased ASCII text, several times faster
# Any letter of the scripts above: one scan tells Latin text (the common case) to skip them.
_NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0900-\u097f\u0e00-\u0e7f"
                        r"\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")
_SAMPLE_CHARS = 2000  # the start of a text says enough; long documents cost no more
_MIN_HITS = 2
_ORDER = {code: i for i, code in enumerate(_STOP_WORDS)}  # ties go to the language listed first
_INDEX: dict[str, tuple[str, ...]] = {}
for _code, _words in _STOP_WORDS.items():
    for _w in _words:
        _INDEX[_w] = (*_INDEX.get(_w, ()), _code)

LANGUAGES = frozenset({*_STOP_WORDS, *(code for code, _ in _SCRIPTS), "und"})


def detect_language(text: str) -> str:
    """ISO 639-1 code of ``text``'s language, or ``"und"``."""
    sample = text[:_SAMPLE_CHARS].lower()
    if sample.isascii():  # no other script to look for, and a plain [a-z] scan finds the words
        words = _ASCII_WORD.findall(sample)
        if not words:
            return "und"
    else:
        words = _WORD.findall(sample)
        letters = sum(map(len, words))
        if letters == 0:
            return "und"
        # A script counts when it makes up a fifth of the letters (quotes in another script do not).
        if len(_NON_LATIN.findall(sample)) * 5 >= letters:
            for code, pattern in _SCRIPTS:
                if len(pattern.findall(sample)) * 5 >= letters:
                    return code
    hits: dict[str, int] = {}
    get = _INDEX.get
    for word in words:
        codes = get(word)
        if codes is not None:
            for code in codes:
                hits[code] = hits.get(code, 0) + 1
    best, most = "und", 0
    for code, n in hits.items():
        if n > most or (n == most and _ORDER[code] < _ORDER[best]):
            best, most = code, n
    return best if most >= _MIN_HITS else "und"


# The batch path (:func:`detect_languages`) for ASCII texts: every word of up to 8 letters
# read as one little-endian integer (its bytes, zero-padded), looked up in the sorted keys of
# the ASCII stop words; the hits are counted per text and combination of languages (a word
# can be a stop word of several) with one bincount, and a small matrix product turns those
# into counts per language.
_CODES = tuple(_STOP_WORDS)
_ASCII_STOP_WORDS = sorted({w for words in _STOP_WORDS.values() for w in words if w.isascii()})
_KEY_BYTES = 8  # longer than any stop word


def _key(word: str) -> int:
    return int.from_bytes(word.encode("ascii"), "little")


_KEYS = np.array(sorted(map(_key, _ASCII_STOP_WORDS)), dtype=np.uint64)
_MASKS = np.array([(1 << 8 * k) - 1 for k in range(_KEY_BYTES + 1)], dtype=np.uint64)  # by word length
_LANGS_OF_KEY = [tuple(c for c in _CODES if w in _STOP_WORDS[c])
                 for w in sorted(_ASCII_STOP_WORDS, key=_key)]
_COMBOS = sorted(set(_LANGS_OF_KEY))
_COMBO_OF_KEY = np.array([_COMBOS.index(langs) for langs in _LANGS_OF_KEY], dtype=np.int64)
_COMBO_LANGS = np.array([[c in langs for c in _CODES] for langs in _COMBOS], dtype=np.int64)
_ANSWERS = np.array([*_CODES, "und"], dtype=object)


def detect_languages(texts: Sequence[str]) -> list[str]:
    """:func:`detect_language` of each text; ASCII texts are scored together, with numpy."""
    # Only the start of a text counts; the common batch (short ASCII texts) is checked in C.
    samples = texts
    if max(map(len, texts), default=0) > _SAMPLE_CHARS:
        samples = [t[:_SAMPLE_CHARS] for t in texts]
    if all(map(str.isascii, samples)):
        return _detect_ascii(samples)
    ascii_ = [i for i, t in enumerate(samples) if t.isascii()]
    out = [detect_language(t) if not t.isascii() else "" for t in samples]
    for i, code in zip(ascii_, _detect_ascii([samples[i] for i in ascii_]), strict=True):
        out[i] = code
    return out


def _detect_ascii(samples: Sequence[str]) -> list[str]:
    """The stop-word vote of each ASCII sample (already cut to _SAMPLE_CHARS), as detect_language's."""
    n = len(samples)
    if n == 0:
        return []
    lengths = np.fromiter(map(len, samples), dtype=np.int64, count=n)
    # A space before the first text and zero bytes after the last: every word has both edges.
    text = (" " + " ".join(samples)).lower().encode("ascii") + bytes(_KEY_BYTES)
    chars = np.frombuffer(text, dtype=np.uint8)
    letter = (chars >= ord("a")) & (chars <= ord("z"))
    edges = np.flatnonzero(letter[1:] != letter[:-1]) + 1
    starts, sizes = edges[0::2], edges[1::2] - edges[0::2]  # every maximal [a-z]+ run: a word
    short = sizes <= _KEY_BYTES
    starts, sizes = starts[short], sizes[short]
    at_every_byte = np.ndarray((len(chars) - _KEY_BYTES + 1,), dtype="<u8", buffer=text, strides=(1,))
    keys = at_every_byte[starts] & _MASKS[sizes]
    at = np.searchsorted(_KEYS, keys)
    at[at == len(_KEYS)] = 0
    hit = _KEYS[at] == keys
    text_of = np.searchsorted(np.cumsum(lengths + 1), starts[hit], side="right")
    combos = len(_COMBOS)
    per_combo = np.bincount(text_of * combos + _COMBO_OF_KEY[at[hit]], minlength=n * combos)
    counts = per_combo.reshape(n, combos) @ _COMBO_LANGS
    best = counts.argmax(axis=1)  # the first of equal counts: ties go to the language listed first
    return list(_ANSWERS[np.where(counts.max(axis=1) >= _MIN_HITS, best, len(_CODES))])
