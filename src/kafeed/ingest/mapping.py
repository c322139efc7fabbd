"""Field mapping: a parsed source row → a serialized ``TrainingSample``, or a rejection.

Rejections are ``(kind, reason)`` pairs; the caller dead-letters them. The
kinds are stable strings (see docs/ingest.md) so a DLQ can be triaged by header.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

from kafeed.ingest.options import IngestOptions
from kafeed.schema.avro import encode_avro
from kafeed.schema.records_pb2 import TrainingSample

Reject = tuple[str, str]

# C0 controls other than tab, newlines, vertical tab and form feed: binary, not text.
_BINARY = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


def content_id(text: str, chars: int = 32) -> str:
    """Stable id of a document without one: sha256 of its UTF-8 text, hex, truncated."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:chars]


def parse_labels(value: Any) -> list[float] | Reject:
    """A number, a numeric string, or a list of those → floats; NaN/inf are refused."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[float] = []
    for item in items:
        if isinstance(item, bool) or item is None:
            return "bad_label", f"label {item!r} is not a number"
        if isinstance(item, int | float):
            number = float(item)
        elif isinstance(item, str):
            try:
                number = float(item)
            except ValueError:
                return "bad_label", f"label {item[:80]!r} is not a number"
        else:
            return "bad_label", f"label of type {type(item).__name__} is not a number"
        if not math.isfinite(number):
            return "bad_label", f"label {item!r} is not finite"
        out.append(number)
    return out


class Mapper:
    """Applies :class:`IngestOptions`' field mapping; one instance per run (hot path)."""

    def __init__(self, options: IngestOptions, *, max_value_bytes: int) -> None:
        self.text_field = options.text_field
        self.id_field = options.id_field
        self.label_field = options.label_field
        self.meta_fields = options.meta_fields
        self.avro = options.format == "avro"
        self.id_chars = options.id_hash_chars
        self.max_value_bytes = max_value_bytes

    def map(
        self, fields: Mapping[str, Any], *, source: str, where_key: str, where: int, timestamp_ms: int,
    ) -> tuple[str, bytes] | Reject:
        """``(id, value)`` for a good row, else ``(kind, reason)`` (a 2-tuple of str, str).

        Callers tell the two apart by the type of the second element.
        """
        text = fields.get(self.text_field, _MISSING)
        if text is _MISSING:
            return "missing_text", f"no field {self.text_field!r}"
        if text is None:
            return "null_text", f"field {self.text_field!r} is null"
        if not isinstance(text, str):
            return "text_not_string", f"field {self.text_field!r} is a {type(text).__name__}, not a string"
        if not text.strip():
            return "empty_text", f"field {self.text_field!r} is empty or whitespace"
        binary = _BINARY.search(text)
        if binary is not None:
            return "binary_content", f"text contains control character {binary.group()!r}"
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return "invalid_utf8", "text is not valid UTF-8 (lone surrogates)"

        raw_id = fields.get(self.id_field)
        if raw_id is None or raw_id == "":
            doc_id = content_id(text, self.id_chars)
        elif isinstance(raw_id, str | int) and not isinstance(raw_id, bool):
            doc_id = str(raw_id)
        else:
            return "bad_id", f"id field {self.id_field!r} is a {type(raw_id).__name__}"

        sample = TrainingSample(input_data=data, id=doc_id, source=source, timestamp=timestamp_ms)
        if self.label_field is not None:
            label = fields.get(self.label_field, _MISSING)
            if label is _MISSING or label is None or label == "":
                return "missing_label", f"no label in field {self.label_field!r}"
            labels = parse_labels(label)
            if isinstance(labels, tuple):
                return labels
            sample.target_values.extend(labels)
        meta = sample.metadata
        meta["kafeed.source"] = source
        meta[where_key] = str(where)
        for name in self.meta_fields:
            value = fields.get(name)
            if value is not None:
                meta[name] = value if isinstance(value, str) else str(value)
        value_bytes = encode_avro(sample) if self.avro else sample.SerializeToString()
        if len(value_bytes) > self.max_value_bytes:
            return "oversize", (f"record is {len(value_bytes)} bytes serialized; the topic accepts "
                                f"at most {self.max_value_bytes}")
        return doc_id, value_bytes


_MISSING: Any = object()
