"""The registry of value formats, and :class:`Decoders`: every stage's one way to read a raw record.

A format turns a record's value into a ``TrainingSample`` and its text, or says why it
cannot (:class:`~kafeed.formats.mapping.Rejected`, which the stage dead-letters; a text
that is not UTF-8 is kind ``encoding`` whatever the format):

``kafeed``  kafeed's own ``TrainingSample`` (Protobuf, or Avro by the ``kafeed.format``
            header); what ``kafeed ingest`` writes. A bad value is kind ``decode``.
``json``    a JSON object (UTF-8), mapped by field paths (:mod:`kafeed.formats.mapping`);
            a value that is no JSON object is kind ``decode``, a bad field ingest's kind.
``text``    the value is the document's text (UTF-8; kind ``encoding`` when it is not).

A record of another format than ``kafeed`` that names no id gets one from where it lies,
``<topic>/<partition>@<offset>``: stable across re-reads, so dedup, lineage and the stages'
exactly-once counts treat it as they treat an ingested record. Its ``source`` is its topic
and its ``timestamp`` the record's.

To add a format: a class with :meth:`ValueFormat.decode`, an entry in :data:`FORMATS` and its
name in kafeed.formats.settings.ValueFormatName.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from kafeed.errors import SchemaError
from kafeed.formats.mapping import FieldMapping, Rejected, text_problem, utf8_text
from kafeed.formats.settings import FormatSettings, TopicFormat
from kafeed.schema.avro import Headers, decode_raw
from kafeed.schema.records_pb2 import TrainingSample

#: A record's sample and its text, or why it has none.
Decoded: TypeAlias = tuple[TrainingSample, str] | Rejected


def record_id(topic: str, partition: int, offset: int) -> str:
    """The id of a record that names none: where it lies, which never changes."""
    return f"{topic}/{partition}@{offset}"


class ValueFormat(Protocol):
    """How one topic's values become samples."""

    name: str

    def decode(self, value: bytes | None, headers: Headers, topic: str, partition: int, offset: int,
               timestamp_ms: int) -> Decoded:
        """The sample in ``value`` and its text, or why there is none."""
        ...


def not_utf8(exc: UnicodeDecodeError, what: str) -> Rejected:
    """The ``encoding`` rejection of a text that is not UTF-8."""
    return Rejected("encoding", f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})")


def _tombstone(topic: str, partition: int, offset: int) -> Rejected:
    return Rejected("decode", f"record {topic}/{partition}@{offset} has no value (tombstone).")


class KafeedFormat:
    """kafeed's own ``TrainingSample`` records."""

    name = "kafeed"

    def __init__(self, fmt: TopicFormat) -> None:
        pass

    def decode(self, value: bytes | None, headers: Headers, topic: str, partition: int, offset: int,
               timestamp_ms: int) -> Decoded:
        try:
            sample = decode_raw(value, headers, topic=topic, partition=partition, offset=offset)
        except SchemaError as exc:
            return Rejected("decode", exc.message)
        try:
            return sample, sample.input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return not_utf8(exc, "input_data")


class JsonFormat:
    """A JSON object per value, mapped by the topic's field paths."""

    name = "json"

    def __init__(self, fmt: TopicFormat) -> None:
        self.mapping = FieldMapping(text_field=fmt.text_field, id_field=fmt.id_field,
                                    label_field=fmt.label_field, meta_fields=fmt.meta_fields)
        # The C scanner behind json.loads, called directly on the decoded text: json.loads spends
        # as long again in Python around it (encoding detection, the whitespace regexes).
        self._scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

    def decode(self, value: bytes | None, headers: Headers, topic: str, partition: int, offset: int,
               timestamp_ms: int) -> Decoded:
        if value is None:
            return _tombstone(topic, partition, offset)
        try:
            text = value.decode("utf-8")
            obj, end = self._scan(text, 0)
        except UnicodeDecodeError as exc:
            return Rejected("decode", f"record {topic}/{partition}@{offset} is not JSON: it is not UTF-8 "
                                      f"({exc.reason} at byte {exc.start})")
        except StopIteration:  # no JSON value at the start (or leading whitespace: parsed below)
            obj, end = self._parse(text, topic, partition, offset)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError; nesting past the stack
            return Rejected("decode", f"record {topic}/{partition}@{offset} is not JSON: {exc}"[:300])
        if type(obj) is not dict:
            if isinstance(obj, Rejected):
                return obj
            return Rejected("decode", f"record {topic}/{partition}@{offset} is a JSON "
                                      f"{type(obj).__name__}, not an object")
        if end != len(text) and not text[end:].isspace():
            return Rejected("decode", f"record {topic}/{partition}@{offset} is not JSON: extra data "
                                      f"at character {end}")
        return self.mapping.sample(obj, topic=topic, partition=partition, offset=offset,
                                   timestamp_ms=timestamp_ms)

    @staticmethod
    def _parse(text: str, topic: str, partition: int, offset: int) -> tuple[Any, int]:
        """json.loads's own reading of a value the scanner did not start on, with its message."""
        try:
            return json.loads(text), len(text)
        except (ValueError, RecursionError) as exc:
            return Rejected("decode", f"record {topic}/{partition}@{offset} is not JSON: {exc}"[:300]), 0


class TextFormat:
    """The value is the text (UTF-8)."""

    name = "text"

    def __init__(self, fmt: TopicFormat) -> None:
        pass

    def decode(self, value: bytes | None, headers: Headers, topic: str, partition: int, offset: int,
               timestamp_ms: int) -> Decoded:
        if value is None:
            return _tombstone(topic, partition, offset)
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            return not_utf8(exc, "value")
        problem = text_problem("value", text) or utf8_text(text)
        if isinstance(problem, Rejected):
            return problem
        return TrainingSample(input_data=value, id=record_id(topic, partition, offset), source=topic,
                              timestamp=timestamp_ms), text


FORMATS: dict[str, Callable[[TopicFormat], ValueFormat]] = {
    f.name: f for f in (KafeedFormat, JsonFormat, TextFormat)
}


class Decoders:
    """The formats of a stage's input topics (:class:`FormatSettings`), each built once."""

    def __init__(self, settings: FormatSettings | None = None) -> None:
        self.settings = settings or FormatSettings()
        self._by_topic: dict[str, ValueFormat] = {}

    def of(self, topic: str) -> ValueFormat:
        """``topic``'s format."""
        found = self._by_topic.get(topic)
        if found is None:
            fmt = self.settings.of(topic)
            found = self._by_topic[topic] = FORMATS[fmt.format](fmt)
        return found

    @property
    def only_kafeed(self) -> bool:
        """Whether every topic holds kafeed's own records (no format declared otherwise)."""
        fmt = self.settings.override.format
        return fmt == "kafeed" or (fmt is None and all(t.format == "kafeed"
                                                       for t in self.settings.topics.values()))

    def is_kafeed(self, topic: str) -> bool:
        """Whether ``topic`` holds kafeed's own records (a stage's fast path may read them itself)."""
        return self.of(topic).name == "kafeed"

    def decode(self, value: bytes | None, headers: Headers, topic: str, partition: int, offset: int,
               timestamp_ms: int = 0) -> Decoded:
        """The sample in one record of ``topic`` and its text, or why there is none."""
        return self.of(topic).decode(value, headers, topic, partition, offset, timestamp_ms)
