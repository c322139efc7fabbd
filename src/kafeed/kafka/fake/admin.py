"""The fake cluster's admin client: the calls kafeed makes, in memory."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafeed.errors import TopicError
from kafeed.kafka.fake.records import kafka_exception

if TYPE_CHECKING:
    from kafeed.kafka.fake.cluster import FakeKafka


@dataclass(frozen=True)
class _Entry:
    value: str
    is_default: bool = False


@dataclass(frozen=True)
class _Offset:
    offset: int


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class FakeAdmin:
    """Metadata, topics created (with their configs) and deleted, records deleted, topic and group
    configs, end offsets."""

    def __init__(self, fake: FakeKafka) -> None:
        self._fake = fake

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._fake.check("list_topics")
        return self._fake.metadata(topic)

    def create_topics(self, new_topics: Sequence[Any], **_: Any) -> dict[str, Any]:
        out: dict[str, Future[None]] = {}
        for new in new_topics:
            future: Future[None] = Future()
            try:
                self._fake.create_topic(new.topic, new.num_partitions, new.config)
                future.set_result(None)
            except TopicError:
                future.set_exception(kafka_exception("TOPIC_ALREADY_EXISTS",
                                                      f"Topic '{new.topic}' already exists."))
            out[new.topic] = future
        return out

    def delete_records(self, partitions: Sequence[Any], **_: Any) -> dict[Any, Any]:
        """Records below each offset are gone: a read from before starts at the new low mark."""
        out: dict[Any, Future[Any]] = {}
        with self._fake.changed:
            for topic in {tp.topic for tp in partitions}:
                self._fake.deletions.append((topic, {tp.partition: tp.offset for tp in partitions
                                                     if tp.topic == topic}, len(self._fake.transactions)))
            for tp in partitions:
                log = self._fake.log(tp.topic, tp.partition)
                start = self._fake.log_start
                start[(tp.topic, tp.partition)] = max(start.get((tp.topic, tp.partition), 0), tp.offset)
                for r in log[:tp.offset]:
                    r.key = r.value = None
                    r.marker = True
                future: Future[Any] = Future()
                future.set_result(tp)
                out[tp] = future
        return out

    def delete_topics(self, topics: Sequence[str], **_: Any) -> dict[str, Any]:
        out: dict[str, Future[None]] = {}
        with self._fake.changed:
            for name in topics:
                future: Future[None] = Future()
                if self._fake.topics.pop(name, None) is None:
                    future.set_exception(kafka_exception("UNKNOWN_TOPIC_OR_PART", "Unknown topic"))
                else:
                    self._fake.configs.pop(name, None)
                    future.set_result(None)
                out[name] = future
        return out

    def describe_configs(self, resources: Sequence[Any], **_: Any) -> dict[Any, Any]:
        """A topic's configs as set at creation (the broker's defaults are not known here)."""
        return {res: _done({k: _Entry(str(v)) for k, v in self._fake.configs.get(res.name, {}).items()})
                for res in resources}

    def incremental_alter_configs(self, resources: Sequence[Any], **_: Any) -> dict[Any, Any]:
        """Group configs are kept in ``FakeKafka.group_configs``; others are accepted as they are."""
        for res in resources:
            if res.restype.name == "GROUP":
                self._fake.group_configs.setdefault(res.name, {}).update(
                    {e.name: e.value for e in res.incremental_configs})
        return {res: _done(None) for res in resources}

    def list_offsets(self, requests: dict[Any, Any], isolation_level: Any = None,
                     **_: Any) -> dict[Any, Any]:
        """Latest offsets (the high watermark; the last stable offset under READ_COMMITTED); any
        other spec gets the log start."""
        self._fake.check("list_offsets")
        committed = getattr(isolation_level, "name", "") == "READ_COMMITTED"
        with self._fake.changed:
            out: dict[Any, Any] = {}
            for tp, spec in requests.items():
                low, high = self._fake.watermarks(tp.topic, tp.partition)
                if "latest" in repr(spec).lower():
                    out[tp] = _done(_Offset(self._fake.stable(tp.topic, tp.partition) if committed else high))
                else:
                    out[tp] = _done(_Offset(low))
            return out
