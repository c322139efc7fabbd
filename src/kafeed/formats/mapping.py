"""The field mapping: one decoded object (a JSON object, an Avro record, ...) → ``TrainingSample``.

The rules are those of ``kafeed ingest`` (docs/ingest.md): the text field must hold a
non-empty string without control characters, the id field a string or an integer, the
label field a number, a numeric string or a list of those; metadata fields are copied as
strings. A field name is a path: ``after.body`` reads ``body`` inside ``after`` (a
Debezium envelope), unless the object has a key ``after.body`` itself. A rejection's
``kind`` is one of ingest's (``missing_text``, ``bad_label``, ...), so a dead-letter topic
is triaged the same way whoever wrote the record.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from kafeed.schema.records_pb2 import TrainingSample


class Rejected(NamedTuple):
    """A row or record that cannot become a sample: a stable ``kind`` and a human ``reason``."""

    kind: str
    reason: str


FLOAT32_MAX = 3.4028234663852886e38

# C0 controls other than tab, newlines, vertical tab and form feed: binary, not text.
# Checked on the UTF-8 bytes with bytes.translate (5x faster than a regex search);
# these bytes never occur inside a multi-byte UTF-8 sequence.
CONTROL = bytes([*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F])
BINARY = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")

MISSING: Any = object()  # a field the record does not have (None is a JSON null)


def parse_labels(value: Any) -> list[float] | Rejected:
    """A number, a numeric string, or a list of those → floats; NaN, inf and values past
    the 32-bit float range of ``target_values`` are refused."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[float] = []
    for item in items:
        if isinstance(item, bool) or item is None:
            return Rejected("bad_label", f"label {item!r} is not a number")
        if isinstance(item, int | float):
            try:
                number = float(item)
            except OverflowError:  # an integer past the range of a double
                return Rejected("bad_label", f"label {str(item)[:40]}... does not fit a 32-bit float")
        elif isinstance(item, str):
            try:
                number = float(item)
            except ValueError:
                return Rejected("bad_label", f"label {item[:80]!r} is not a number")
        else:
            return Rejected("bad_label", f"label of type {type(item).__name__} is not a number")
        if not math.isfinite(number):
            return Rejected("bad_label", f"label {str(item)[:80]!r} is not finite")
        if abs(number) > FLOAT32_MAX:  # target_values are 32-bit floats
            return Rejected("bad_label", f"label {str(item)[:80]!r} does not fit a 32-bit float")
        out.append(number)
    return out


def text_problem(field: str, text: Any) -> Rejected | None:
    """Why ``text`` (the value of ``field``) is no document text, or None when it is one."""
    if type(text) is not str:
        if text is MISSING:
            return Rejected("missing_text", f"no field {field!r}")
        if text is None:
            return Rejected("null_text", f"field {field!r} is null")
        return Rejected("text_not_string", f"field {field!r} is a {type(text).__name__}, not a string")
    if not text or text.isspace():
        return Rejected("empty_text", f"field {field!r} is empty or whitespace")
    return None


def utf8_text(text: str) -> bytes | Rejected:
    """``text`` as UTF-8, refused when it holds lone surrogates or binary control characters."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return Rejected("invalid_utf8", "text is not valid UTF-8 (lone surrogates)")
    if len(data.translate(None, CONTROL)) != len(data):
        binary = BINARY.search(data)
        char = binary.group().decode() if binary else "?"
        return Rejected("binary_content", f"text contains control character {char!r}")
    return data


class _Path:
    """One field name, read as a key first and as a dotted path when the key is absent."""

    __slots__ = ("name", "steps")

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = tuple(name.split(".")) if "." in name else None

    def get(self, obj: Mapping[str, Any]) -> Any:
        value = obj.get(self.name, MISSING)
        if value is not MISSING or self.steps is None:
            return value
        node: Any = obj
        for step in self.steps:
            if not isinstance(node, Mapping):
                return MISSING
            node = node.get(step, MISSING)
            if node is MISSING:
                return MISSING
        return node


class FieldMapping:
    """Maps decoded objects onto samples by field paths (see the module docstring)."""

    def __init__(self, *, text_field: str = "text", id_field: str = "id", label_field: str | None = None,
                 meta_fields: tuple[str, ...] = ()) -> None:
        self.text_field = text_field
        self._text = _Path(text_field)
        self._id = _Path(id_field)
        self._label = None if label_field is None else _Path(label_field)
        self._meta = tuple(_Path(name) for name in meta_fields)

    def sample(self, obj: Mapping[str, Any], *, topic: str, partition: int, offset: int,
               timestamp_ms: int) -> tuple[TrainingSample, str] | Rejected:
        """The sample ``obj`` maps to and its text; an object without an id is named by where its
        record lies (kafeed.formats.registry.record_id), its ``source`` is the topic."""
        text = obj.get(self.text_field, MISSING) if self._text.steps is None else self._text.get(obj)
        # The common case in one test: a string of some non-blank text (isspace is False for "").
        if type(text) is not str or not text or text.isspace():
            problem = text_problem(self.text_field, text)
            if problem is not None:
                return problem
        data = utf8_text(text)
        if type(data) is not bytes:
            return data  # type: ignore[return-value]  # a Rejected
        ident = self._id
        raw_id = obj.get(ident.name, MISSING) if ident.steps is None else ident.get(obj)
        if type(raw_id) is str and raw_id:
            doc_id = raw_id
        elif raw_id is MISSING or raw_id is None or raw_id == "":
            doc_id = f"{topic}/{partition}@{offset}"
        elif isinstance(raw_id, int) and not isinstance(raw_id, bool):
            doc_id = str(raw_id)
        else:
            return Rejected("bad_id", f"id field {ident.name!r} is a {type(raw_id).__name__}")
        try:
            sample = TrainingSample(input_data=data, id=doc_id, source=topic, timestamp=timestamp_ms)
            if self._label is not None:
                label = self._label.get(obj)
                if label is MISSING or label is None or label == "":
                    return Rejected("missing_label", f"no label in field {self._label.name!r}")
                labels = parse_labels(label)
                if isinstance(labels, Rejected):
                    return labels
                sample.target_values.extend(labels)
            for path in self._meta:
                value = path.get(obj)
                if value is not MISSING and value is not None:
                    sample.metadata[path.name] = value if type(value) is str else str(value)
        except UnicodeEncodeError:
            return Rejected("invalid_utf8", "id or metadata is not valid UTF-8 (lone surrogates)")
        return sample, text
