"""Resolve start/end specs to concrete offsets, retrying while the broker is away."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from kafeed.errors import BrokerUnavailable, TopicError
from kafeed.loader.settings import EndSpec, LoaderSettings, OffsetSpec

log = logging.getLogger("kafeed")
T = TypeVar("T")


def with_retry(call: Callable[[], T], *, action: str, settings: LoaderSettings) -> T:
    """Run ``call``; while no broker answers, log once per attempt and back off (1 s .. 30 s).

    Gives up with :class:`BrokerUnavailable` after ``settings.broker_timeout_s`` (``None``:
    never). Errors that are not about reaching the cluster are raised at once. ``action``
    names the attempt in the log line.
    """
    deadline = None if settings.broker_timeout_s is None else time.monotonic() + settings.broker_timeout_s
    delay = 1.0
    while True:
        try:
            return call()
        except BrokerUnavailable as err:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            log.warning("kafeed loader: %s (%s); retrying in %.0f s.", err.message, action, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)


def list_partitions(consumer: Any, settings: LoaderSettings) -> list[tuple[str, int]]:
    """Every (topic, partition) of the configured topics; a missing topic is an error."""
    out: list[tuple[str, int]] = []
    for topic in settings.topics:

        def metadata(topic: str = topic) -> Any:
            return consumer.list_topics(topic, timeout=10)

        meta = with_retry(metadata, action=f"read metadata of topic {topic!r}", settings=settings)
        info = meta.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise TopicError(
                f"Topic {topic!r} does not exist or has no partitions.",
                hint="Create it (`kafeed topic create`) or fix the topic name.",
            )
        out.extend((topic, p) for p in info.partitions)
    return sorted(out)


def explicit_offset(spec: Mapping[int | str, int], topic: str, partition: int) -> int | None:
    for key in (f"{topic}:{partition}", partition, str(partition)):
        if key in spec:
            return int(spec[key])
    return None


def timestamp_ms(spec: datetime | int) -> int:
    return int(spec.timestamp() * 1000) if isinstance(spec, datetime) else int(spec)


def watermarks(consumer: Any, topic: str, partition: int, settings: LoaderSettings) -> tuple[int, int]:
    from kafeed.kafka.types import TopicPartition

    low, high = with_retry(
        lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False),
        action=f"read watermarks of {topic}:{partition}", settings=settings,
    )
    return int(low), int(high)


def _for_time(consumer: Any, topic: str, partition: int, ms: int, settings: LoaderSettings) -> int:
    from kafeed.kafka.types import TopicPartition

    found = with_retry(
        lambda: consumer.offsets_for_times([TopicPartition(topic, partition, ms)], timeout=10),
        action=f"look up offsets by time in {topic}:{partition}", settings=settings,
    )
    offset = int(found[0].offset)
    if offset < 0:  # no record at or after that time: the end of the partition
        return watermarks(consumer, topic, partition, settings)[1]
    return offset


def resolve_start(consumer: Any, topic: str, partition: int, settings: LoaderSettings,
                  marks: tuple[int, int] | None = None) -> int:
    """Where ``settings.start`` starts the partition; ``marks``: its watermarks, if read already."""
    spec: OffsetSpec = settings.start
    low, high = marks or watermarks(consumer, topic, partition, settings)
    if spec == "earliest":
        return low
    if spec == "latest":
        return high
    if isinstance(spec, datetime | int):
        return _for_time(consumer, topic, partition, timestamp_ms(spec), settings)
    explicit = explicit_offset(spec, topic, partition)
    return low if explicit is None else max(explicit, low)


def resolve_end(consumer: Any, topic: str, partition: int, settings: LoaderSettings,
                marks: tuple[int, int] | None = None) -> int | None:
    """Where ``settings.end`` ends the partition (None: never); ``marks``: its watermarks, if
    read already."""
    spec: EndSpec = settings.end
    if spec is None:
        return None
    if spec == "latest":
        return (marks or watermarks(consumer, topic, partition, settings))[1]
    if isinstance(spec, datetime | int):
        return _for_time(consumer, topic, partition, timestamp_ms(spec), settings)
    return explicit_offset(spec, topic, partition)
