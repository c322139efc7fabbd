"""Text normalization: Unicode NFC, control characters out, whitespace runs collapsed, trimmed.

Control characters are Unicode category Cc (U+0000-U+001F, U+007F-U+009F) except
``\\n`` and ``\\t``; ``\\r`` is one of them, so CRLF becomes LF. A run of
horizontal whitespace (tab and Unicode spaces included) becomes one space,
spaces around a newline go, and more than ``max_blank_lines`` blank lines in a
row shrink to that many: line structure survives, which the duplicate-line
filter and line-oriented text (verse, code) need.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from kafeed.prepare.settings import NormalizeSettings

_DEFAULT = NormalizeSettings()
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]+")
# The patterns match only what changes (text is mostly single spaces and bare newlines, and
# a substitution per word made these passes the slowest Python step of prepare): a run of
# two or more horizontal spaces or one that is not a plain space; a newline with a space
# beside it.
_HSPACE = re.compile(r"[^\S\n ][^\S\n]*| [^\S\n]+")
_EDGE_SPACE = re.compile(r" \n ?|\n ")


def normalize_text(text: str, settings: NormalizeSettings | None = None) -> str:
    """The normalized form of ``text`` (identity when the stage is disabled)."""
    settings = settings or _DEFAULT
    if not settings.enabled:
        return text
    if not text.isascii():  # ASCII is already in every normalization form
        text = unicodedata.normalize(settings.form, text)
    text = _CONTROL.sub("", text)
    text = _HSPACE.sub(" ", text)
    text = _EDGE_SPACE.sub("\n", text)
    limit = settings.max_blank_lines + 1
    if "\n" * (limit + 1) in text:
        text = re.sub(f"\n{{{limit + 1},}}", "\n" * limit, text)
    return text.strip()


def normalize_batch(texts: Sequence[str], settings: NormalizeSettings | None = None) -> list[str]:
    return [normalize_text(t, settings) for t in texts]
