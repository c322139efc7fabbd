"""Field mapping: a parsed source row → :class:`Mapped` or :class:`Rejected`.

A mapped row is a serialized ``TrainingSample`` and its key; the caller produces what is
mapped and dead-letters what is rejected. A rejection's ``kind`` is a stable string (see
docs/ingest.md) so a DLQ can be triaged by header. The rules are those of
kafeed.formats.mapping, which the stages apply to other producers' topics; this module
writes the records straight in the wire format.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

from kafeed.formats.mapping import MISSING, parse_labels, text_problem, utf8_text
from kafeed.formats.mapping import Rejected as Rejected  # the ingest readers' rejections too
from kafeed.ingest.options import IngestOptions
from kafeed.schema.avro import encode_avro
from kafeed.schema.records_pb2 import TrainingSample

#: A good row: the record's key (the document id, UTF-8) and its serialized value, the pair
#: the producer takes. A plain tuple, not a NamedTuple: one is made per record, and a
#: NamedTuple's Python ``__new__`` cost ~0.2 µs more each (measured, ~10 % of the mapping).
Mapped = tuple[bytes, bytes]


def content_id(text: str, chars: int = 32) -> str:
    """Stable id of a document without one: sha256 of its UTF-8 text, hex, truncated."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:chars]


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n > 127:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(128)]


def _field(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data


def _map_entry(key: str, value: str) -> bytes:
    entry = _field(b"\x0a", key.encode()) + _field(b"\x12", value.encode())
    return _field(b"\x1a", entry)


class Mapper:
    """Applies :class:`IngestOptions`' field mapping; one instance per run (hot path).

    Protobuf values are written directly in the wire format of ``TrainingSample``
    (field numbers from records.proto), with the parts that are constant for a
    batch (source, timestamp, the ``kafeed.source`` metadata entry) encoded once by
    :meth:`context`:
    about twice as fast as building a message per record. Avro goes through fastavro.
    """

    def __init__(self, options: IngestOptions, *, max_value_bytes: int) -> None:
        self.text_field = options.text_field
        self.id_field = options.id_field
        self.label_field = options.label_field
        self.meta_fields = options.meta_fields
        self.avro = options.format == "avro"
        self.id_chars = options.id_hash_chars
        self.max_value_bytes = max_value_bytes
        self._ctx: tuple[str, str, int] = ("", "", -1)
        self._tail = b""
        self._where_prefix = b""

    def context(self, source: str, where_key: str, timestamp_ms: int) -> None:
        """Set what every following record shares (cheap when unchanged)."""
        if self._ctx == (source, where_key, timestamp_ms):
            return
        self._ctx = (source, where_key, timestamp_ms)
        self._tail = (_map_entry("kafeed.source", source) + b"\x20" + _varint(timestamp_ms & (2**64 - 1))
                      + _field(b"\x32", source.encode()))
        self._where_prefix = _field(b"\x0a", where_key.encode()) + b"\x12"

    def map(
        self, fields: Mapping[str, Any], *, source: str, where_key: str, where: int, timestamp_ms: int,
    ) -> tuple[str, bytes] | Rejected:
        """One row under its own context: ``(id, value)``, or why it was rejected."""
        self.context(source, where_key, timestamp_ms)
        result = self.map_row(fields, where)
        if isinstance(result, Rejected):
            return result
        return result[0].decode(), result[1]

    def map_row(self, fields: Mapping[str, Any], where: int) -> Mapped | Rejected:
        """One row under the current :meth:`context` (the hot loop's entry); callers tell a
        rejection by its type, ``isinstance(result, Rejected)``."""
        text = fields.get(self.text_field, MISSING)
        problem = text_problem(self.text_field, text)
        if problem is not None:
            return problem
        data = utf8_text(text)
        if isinstance(data, Rejected):
            return data
        raw_id = fields.get(self.id_field)
        if raw_id is None or raw_id == "":
            doc_id = content_id(text, self.id_chars)
        elif type(raw_id) is str:
            doc_id = raw_id
        elif isinstance(raw_id, int) and not isinstance(raw_id, bool):
            doc_id = str(raw_id)
        else:
            return Rejected("bad_id", f"id field {self.id_field!r} is a {type(raw_id).__name__}")
        labels: list[float] = []
        if self.label_field is not None:
            label = fields.get(self.label_field, MISSING)
            if label is MISSING or label is None or label == "":
                return Rejected("missing_label", f"no label in field {self.label_field!r}")
            parsed = parse_labels(label)
            if isinstance(parsed, Rejected):
                return parsed
            labels = parsed
        meta: dict[str, str] = {}
        for name in self.meta_fields:
            if (v := fields.get(name)) is not None:
                meta[name] = v if type(v) is str else str(v)
        try:
            ident = doc_id.encode()
            if self.avro:
                value = self._avro(data, doc_id, labels, meta, where)
            else:
                value = self._protobuf(data, ident, labels, meta, where)
        except UnicodeEncodeError:
            return Rejected("invalid_utf8", "id or metadata is not valid UTF-8 (lone surrogates)")
        if len(value) > self.max_value_bytes:
            return Rejected("oversize", f"record is {len(value)} bytes serialized; the topic accepts "
                                        f"at most {self.max_value_bytes}")
        return ident, value

    def _protobuf(self, data: bytes, ident: bytes, labels: list[float], meta: dict[str, str],
                  where: int) -> bytes:
        w = b"%d" % where
        entry = self._where_prefix + _SMALL[len(w)] + w
        n = len(data)
        head = b"\x0a" + (_SMALL[n] if n < 128 else _varint(n))
        if not labels and not meta:  # the common case in one join
            return b"".join((head, data, b"\x1a", _SMALL[len(entry)], entry,
                             b"\x2a", _varint(len(ident)), ident, self._tail))
        parts = [head, data]
        if labels:
            packed = struct.pack(f"<{len(labels)}f", *labels)
            parts += [b"\x12", _varint(len(packed)), packed]
        parts += [b"\x1a", _SMALL[len(entry)], entry]
        for k, v in meta.items():
            parts.append(_map_entry(k, v))
        parts += [b"\x2a", _varint(len(ident)), ident, self._tail]
        return b"".join(parts)

    def _avro(self, data: bytes, doc_id: str, labels: list[float], meta: dict[str, str], where: int) -> bytes:
        source, where_key, timestamp_ms = self._ctx
        sample = TrainingSample(input_data=data, id=doc_id, source=source, timestamp=timestamp_ms)
        sample.target_values.extend(labels)
        sample.metadata.update({"kafeed.source": source, where_key: str(where), **meta})
        return encode_avro(sample)

