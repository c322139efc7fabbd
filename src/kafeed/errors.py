"""kafeed's exceptions, one tree rooted at :class:`KafeedError`.

::

    KafeedError
    ├── ConfigError          bad settings or arguments, caught before any work starts
    ├── ToolMissing          java / mvn absent or too old for the local broker
    ├── BrokerError          a local broker failed to start, stop or answer
    ├── BrokerUnavailable    no Kafka cluster answers at the bootstrap servers
    ├── CatalogUnavailable   the Iceberg catalog of an archive could not be opened or written
    ├── KafkaOperationError  the cluster refused an operation (kept: librdkafka ``code``)
    │   ├── NotAuthorized    the cluster's ACLs refuse this principal the operation
    │   ├── TopicError       topic create / describe / delete failed
    │   │   ├── TopicExists  a topic to create is there already
    │   │   └── UnknownTopic a topic (or partition) the operation names does not exist
    │   └── ReadIncomplete   a read to a topic's end stopped short (names the partitions left)
    ├── SchemaError          a record could not be decoded (names topic/partition/offset)
    ├── IngestError          a source failed while being read (bad SQL, I/O error mid-file)
    ├── TooManyDeadLetters   a stage dead-lettered more of its input than --max-dlq-ratio allows
    ├── DrainIncomplete      --until-caught-up could not see every partition processed to its end
    ├── ResumeMismatch       a saved state does not fit the current settings
    └── SecureAggregationError  a masked update, key roster or seed does not fit its round

Errors from librdkafka enter at the Kafka boundary (:mod:`kafeed.kafka`), whose clients
raise these and nothing else; the original ``KafkaError`` code is kept on the wrapper, and
the cases a caller branches on have classes of their own, so no caller outside the boundary
needs librdkafka's codes.
"""

from __future__ import annotations

from typing import Any


class KafeedError(Exception):
    """Root of every error kafeed raises on purpose.

    ``hint`` says what to do about it; the CLI prints message and hint.
    ``code`` is librdkafka's error code when the error came from the client.
    """

    def __init__(self, message: str, *, hint: str | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} {self.hint}"


class ConfigError(KafeedError):
    """Settings or arguments are invalid."""


class ToolMissing(KafeedError):
    """An external program the local broker needs is missing or too old."""


class BrokerError(KafeedError):
    """A local broker could not be started, stopped or inspected."""


class BrokerUnavailable(KafeedError):
    """No Kafka cluster answered at the configured bootstrap servers."""


class CatalogUnavailable(KafeedError):
    """The Iceberg catalog of an archive could not be opened, read or committed to."""


class KafkaOperationError(KafeedError):
    """The cluster answered but refused or failed an operation."""


class NotAuthorized(KafkaOperationError):
    """The cluster's ACLs refuse this principal the operation (retrying cannot help)."""


class TopicError(KafkaOperationError):
    """A topic operation failed."""


class TopicExists(TopicError):
    """A topic to create exists already."""


class UnknownTopic(TopicError):
    """A topic or partition the operation names does not exist."""


class ReadIncomplete(KafkaOperationError):
    """Reading a topic to its end made no progress for too long; the partitions left are named."""


class SchemaError(KafeedError):
    """A record could not be decoded; the message names where it came from."""


class IngestError(KafeedError):
    """A source could not be read (a query failed, a file vanished mid-run)."""


class TooManyDeadLetters(KafeedError):
    """A run sent more of its records to the dead-letter topic than allowed (they stay committed)."""

    @classmethod
    def check(cls, *, stage: str, records_in: int, dead_lettered: int, max_ratio: float | None,
              dlq_topic: str) -> None:
        """Raise when the run's dead-letter share is too high.

        ``max_ratio`` None: only a run that read records and dead-lettered every one fails.
        Otherwise it fails when ``dead_lettered / records_in > max_ratio``.
        """
        if records_in <= 0:
            return
        hint = (f"The dead letters in {dlq_topic} carry the reason in their kafeed.error.kind and "
                "kafeed.error.reason headers; what was committed stays committed. A topic another "
                "producer wrote (JSON, text) is read with its value format: --value-format or the "
                "[formats] table (docs/formats.md).")
        if max_ratio is None:
            if dead_lettered >= records_in:
                raise cls(f"{stage}: every one of the {records_in:,} records read went to {dlq_topic}.",
                          hint=hint)
            return
        if dead_lettered / records_in > max_ratio:
            raise cls(f"{stage}: {dead_lettered:,} of {records_in:,} records "
                      f"({dead_lettered / records_in:.1%}) went to {dlq_topic}, above "
                      f"--max-dlq-ratio {max_ratio:g}.", hint=hint)


class DrainIncomplete(KafeedError):
    """A drain (``--until-caught-up``) gave up: some partitions of its input stayed behind their end."""


class ResumeMismatch(KafeedError):
    """A saved state was taken under settings that differ from the current ones."""


class SecureAggregationError(KafeedError):
    """A federated round's masked update, key roster or seed does not fit the round; nothing is summed."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_validation(exc: Exception) -> str:
    """A pydantic ``ValidationError`` as ``field: got X, should be ... ; ...`` on one line.

    No documentation URLs, no multi-line dumps: each problem names the field, what it got
    and what is allowed (pydantic's own words for the rule, first letter lowered).
    """
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return " ".join(str(exc).split())
    problems = []
    for err in errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__") or "value"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        msg = msg[:1].lower() + msg[1:]
        if msg.startswith("input should be"):
            msg = "should be" + msg.removeprefix("input should be")
        if err.get("type") in ("missing", "extra_forbidden") or "input" not in err:
            problems.append(f"{loc}: {msg}")
        else:
            problems.append(f"{loc}: got {_shown(err['input'])}, {msg}")
    return "; ".join(problems)


def invalid_settings(exc: Exception, *, what: str, hint: str | None = None) -> ConfigError:
    """The one translation of a settings validation error into a :class:`ConfigError`."""
    return ConfigError(f"Invalid {what}: {describe_validation(exc)}.", hint=hint)
