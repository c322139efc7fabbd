"""Reading a topic to its end: the one implementation, with one error behaviour.

A read takes each partition's end when it begins (the read_committed consumer's watermark:
the last stable offset, below any transaction still open), assigns the partitions from
their start (or from given offsets) and returns every committed record below those ends.
End-of-partition events count too, so a tail of aborted records or transaction markers
ends a partition. It never returns part of what was asked: when no
partition moves for ``timeout_s`` it raises :class:`~kafeed.errors.ReadIncomplete`
naming each partition left and where it stood. Authorization and fatal consumer errors
end it at once; other consumer errors are librdkafka's to retry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Mapping
from types import TracebackType
from typing import Any

from kafeed.errors import KafeedError, ReadIncomplete, TopicError
from kafeed.kafka.clients import close_consumer
from kafeed.kafka.consumer_errors import final_consumer_error
from kafeed.kafka.translate import translate_kafka_error

_HINT = ("A transaction may still be open there, or a broker is away: check `kafeed broker status`, "
         "then run it again.")


def reader_config() -> dict[str, Any]:
    """A read_committed reader's own settings: a group of its own that commits nothing."""
    return {"group.id": f"kafeed-reader-{uuid.uuid4().hex[:12]}", "enable.partition.eof": True,
            "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800}


class TopicReader:
    """One read_committed consumer that reads ranges of a topic's partitions, read after read.

    Built by :meth:`kafeed.kafka.KafkaClients.reader`; a context manager that closes the
    consumer. ``what`` names it in log lines.
    """

    def __init__(self, consumer: Any, *, what: str = "reader") -> None:
        self._consumer = consumer
        self.what = what

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._consumer is not None:
            close_consumer(self._consumer, what=self.what)
            self._consumer = None

    def partitions(self, topic: str, *, timeout_s: float = 15.0) -> list[int]:
        """Every partition of ``topic``; :class:`~kafeed.errors.TopicError` when it does not exist."""
        try:
            meta = self._consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        except Exception as exc:
            raise translate_kafka_error(exc, action=f"read the metadata of topic {topic!r}") from exc
        if meta is None or meta.error is not None or not meta.partitions:
            raise TopicError(f"Topic {topic!r} does not exist.", hint="Check the topic name and --bootstrap.")
        return sorted(meta.partitions)

    def watermarks(self, topic: str, partitions: Collection[int] | None = None, *,
                   timeout_s: float = 15.0) -> dict[int, tuple[int, int]]:
        """``{partition: (low, high)}`` watermarks of ``partitions`` (all of ``topic``'s by default)."""
        from confluent_kafka import TopicPartition

        parts = sorted(partitions) if partitions is not None else self.partitions(topic, timeout_s=timeout_s)
        try:
            return {p: tuple(self._consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=timeout_s)) for p in parts}
        except Exception as exc:
            raise translate_kafka_error(exc, action=f"read the watermarks of topic {topic!r}") from exc

    def read_to_end(self, topic: str, partitions: Collection[int] | None = None, *,
                    timeout_s: float = 30.0, hint: str | None = None) -> list[Any]:
        """Every committed record of ``partitions`` (default: all) up to the ends they have now."""
        marks = self.watermarks(topic, partitions, timeout_s=timeout_s)
        return self.read(topic, {p: (low, high) for p, (low, high) in marks.items() if high > low},
                         timeout_s=timeout_s, hint=hint)

    def read(self, topic: str, ranges: Mapping[int, tuple[int, int]], *, timeout_s: float = 30.0,
             hint: str | None = None) -> list[Any]:
        """The committed records of ``ranges`` (``{partition: (start, end)}``, end exclusive), in order.

        Raises :class:`~kafeed.errors.ReadIncomplete` when no partition moves for ``timeout_s``.
        """
        from confluent_kafka import KafkaError, TopicPartition

        todo = {p: end for p, (start, end) in ranges.items() if end > start}
        if not todo:
            return []
        at = {p: ranges[p][0] for p in todo}
        records: list[Any] = []
        try:
            self._consumer.assign([TopicPartition(topic, p, at[p]) for p in sorted(todo)])
            moved = time.monotonic()
            while todo:
                if time.monotonic() - moved > timeout_s:
                    raise _incomplete(topic, todo, at, timeout_s, hint)
                for msg in self._consumer.consume(num_messages=10_000, timeout=0.5):
                    p = msg.partition()
                    if p not in todo:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            failure = final_consumer_error(err, action=f"read topic {topic!r}")
                            if failure is not None:
                                raise failure
                            continue
                    elif msg.offset() < todo[p]:
                        records.append(msg)
                    if msg.offset() + (err is None) > at[p]:
                        at[p] = msg.offset() + (err is None)
                        moved = time.monotonic()
                    if at[p] >= todo[p]:
                        del todo[p]
        except KafeedError:
            raise
        except Exception as exc:
            raise translate_kafka_error(exc, action=f"read topic {topic!r}") from exc
        finally:
            if self._consumer is not None:
                self._consumer.unassign()
        return records


def _incomplete(topic: str, todo: Mapping[int, int], at: Mapping[int, int], timeout_s: float,
                hint: str | None) -> ReadIncomplete:
    left = ", ".join(f"{p} (at {at[p]:,} of {end:,})" for p, end in sorted(todo.items()))
    return ReadIncomplete(
        f"Could not read topic {topic!r} to its end: partition{'s' if len(todo) > 1 else ''} {left} "
        f"made no progress for {timeout_s:g} s.", hint=hint or _HINT)
