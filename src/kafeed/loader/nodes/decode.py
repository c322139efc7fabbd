"""Turn consumed messages into token arrays or sample dicts; bad records are skipped.

A bad record (undecodable, tombstone, unknown dtype, token count that does not match the
payload, another tokenizer than asked for) is logged with where it came from, produced to
the dead-letter topic when one is set, and counted by the reader (kafeed.loader.nodes.reader).
Bad records among good ones never stop training.

A topic of the wrong record type does: once a reader has taken :data:`WRONG_TYPE_AFTER`
records with a value from one topic and decoded none of them (tombstones do not count),
or reaches the end of a bounded run having decoded none of that topic's records, it
raises :class:`SchemaError` naming the topic, what it found, and which command writes the
right records. After one record of a topic decoded without fields unknown to the schema,
that topic is never judged again. (Protobuf parses some records of another message type
without error, with unknown fields: those are delivered as before but prove nothing.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from google.protobuf.message import Message

from kafeed.errors import SchemaError
from kafeed.formats import Decoders, ValueFormat
from kafeed.kafka import KafkaClients, dead_letter_headers
from kafeed.loader.nodes.record_kinds import KINDS, RecordKind, lenient, parse_as
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.partition import Entry

log = logging.getLogger("kafeed")

WRONG_TYPE_AFTER = 64


def sniff(value: bytes, kind: RecordKind) -> str:
    """What an undecodable record most likely is, in a few words."""
    if not value:
        return "empty values"
    text = value.lstrip()[:1]
    if text in (b"{", b"[", b'"'):
        try:
            json.loads(value)
            return "JSON text"
        except ValueError:
            pass
    for other in KINDS.values():
        if other is kind:
            continue
        try:
            other.parse(value, None, None)
            return f"{other.message} records"
        except SchemaError:
            pass
    try:
        value.decode("utf-8")
        return "plain text"
    except UnicodeDecodeError:
        return "bytes that are no kafeed record"


class RecordDecoder:
    """Decodes for one reader, by its record kind (kafeed.loader.nodes.record_kinds). The reader
    counts what it takes (kafeed.loader.nodes.reader); the decoder logs and dead-letters bad records."""

    def __init__(self, settings: LoaderSettings, clients: KafkaClients) -> None:
        self.settings = settings
        self._clients = clients  # the dead-letter producer's
        self.kind = KINDS[settings.kind]
        self._parse = self.kind.parse
        # A samples reader of topics another producer wrote: their values by the topics' formats.
        decoders = Decoders(settings.formats)
        self._formats: dict[str, ValueFormat] = {} if self.kind.packs else {
            t: fmt for t in settings.topics if (fmt := decoders.of(t)).name != "kafeed"}
        self._producer: Any = None
        # Topics not yet shown to hold the right record type: topic -> [records bad, last value].
        self._unproven: dict[str, list[Any]] = {t: [0, b""] for t in settings.topics}

    def for_partition(self, topic: str, partition: int) -> Callable[[Entry], Any]:
        """How a partition's queued Kafka records (kafeed.loader.sources.partition) decode: by the
        kind's fast decode where it has one (kafeed.loader.nodes.record_kinds), which hands what it
        does not take as good to :meth:`decode`."""
        general = partial(self.decode, topic, partition)
        if self.kind.fast is None:
            return general
        return self.kind.fast(topic, self.settings.tokenizer, self._unproven, general)

    def decode(self, topic: str, partition: int, entry: Entry) -> Any:
        """A queued record's payload, from its value; ``None`` for a bad record (already
        logged and dead-lettered)."""
        offset, value, stamp, _nbytes, key = entry
        fmt = self._formats.get(topic) if self._formats else None  # no lookup for kafeed's records
        try:
            if fmt is None:
                payload, record = self._parse(value, (topic, partition, offset), self.settings.tokenizer)
            else:
                payload, record = parse_as(fmt, value, (topic, partition, offset), stamp)
        except SchemaError as exc:
            self._bad(topic, partition, offset, value, key, exc)
            return None
        if self._unproven:
            self._prove(topic, record)
        return payload

    def accept_cold(self, topic: str) -> None:
        """A payload was decoded from ``topic``'s archive table columns: the table is checked
        to hold this record type, which proves the topic's."""
        self._unproven.pop(topic, None)

    def _prove(self, topic: str, record: Message) -> None:
        """A record that decoded shows its topic holds the right type, unless protobuf only
        accepted it leniently (kafeed.loader.nodes.record_kinds.lenient)."""
        if topic in self._unproven and not lenient(record):
            del self._unproven[topic]

    def _bad(self, topic: str, partition: int, offset: int, value: bytes | None,
             key: bytes | None, exc: SchemaError) -> None:
        log.warning("kafeed loader: skipped a bad record: %s", exc.message)
        self._dead_letter(topic, partition, offset, value, key, exc)
        unproven = self._unproven.get(topic)
        if unproven is not None and value is not None:
            unproven[0] += 1
            unproven[1] = value
            if unproven[0] >= WRONG_TYPE_AFTER:
                raise self.wrong_type(topic)

    def wrong_type(self, topic: str) -> SchemaError:
        """The error for a topic none of whose records decoded (see the module docstring)."""
        bad, value = self._unproven[topic]
        other = self._other_tokenizer(value)
        if other is not None:
            return SchemaError(
                f"Topic {topic!r} holds TokenizedDocument records of another tokenizer: none of the "
                f"{bad} records read from it was tokenized with {self.settings.tokenizer!r}; they "
                f"were tokenized with {other!r}.",
                hint="Read it with the tokenizer that prepared it (`kafeed train --tokenizer`), or "
                     "run `kafeed prepare` with this tokenizer into another topic.")
        return SchemaError(
            f"Topic {topic!r} does not hold {self.kind.message} records: none of the {bad} records read "
            f"from it decoded, and they look like {sniff(value, self.kind)}.", hint=self.kind.hint)

    def _other_tokenizer(self, value: bytes) -> str | None:
        """The tokenizer a well-formed record names, when it is not the expected one."""
        if self.settings.tokenizer is None:
            return None
        other = self.kind.tokenizer_of(value)
        return None if other == self.settings.tokenizer else other

    def check_end(self) -> None:
        """At the end of a bounded run: refuse a topic that had records but none decoded."""
        for topic, (bad, _value) in sorted(self._unproven.items()):
            if bad:
                raise self.wrong_type(topic)

    def _dead_letter(self, topic: str, partition: int, offset: int, value: bytes | None,
                     key: bytes | None, exc: SchemaError) -> None:
        if self.settings.dlq_topic is None:
            return
        if self._producer is None:
            self._producer = self._clients.producer()
        self._producer.produce(
            self.settings.dlq_topic, value=value, key=key,
            headers=dead_letter_headers(kind="decode", reason=exc.message, stage="loader",
                                        source=(topic, partition, offset)))
        self._producer.poll(0)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
