"""`kafeed route` as a stage on :mod:`kafeed.stream`: the rules engine, exactly once.

Stateless: the core alone makes it exactly once (each batch's outputs, dead letters and
input offsets commit in one transaction). Per-rule counts are kept over committed
batches, so they match what read_committed consumers of the output topics see.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, invalid_settings
from kafeed.formats import Decoders, FormatSettings
from kafeed.route.engine import DEFAULT_RULE, RouteBatch, Router
from kafeed.route.rules import RuleSet
from kafeed.stream import (
    BatchResult,
    KafkaTuning,
    Record,
    Stage,
    StreamProcessor,
    StreamSettings,
    StreamStats,
)
from kafeed.stream.settings import TOPIC_PATTERN
from kafeed.telemetry import metrics as m

#: Records per transaction. A transaction costs a few round trips whatever its size, and
#: routing a record costs a few microseconds, so small transactions spend most of the time
#: committing (docs/route.md, "Benchmark"); they are gathered from consume calls of
#: ``poll_records`` (2,000), and commit early when the input pauses.
ROUTE_BATCH_SIZE = 20_000


class RouteSettings(BaseModel):
    """What `kafeed route` reads and where its dead letters go; the rules come separately."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str = Field(default="raw", pattern=TOPIC_PATTERN)
    group: str = Field(default="kafeed-route", min_length=1)
    dlq: str | None = Field(default=None, pattern=TOPIC_PATTERN)  # default: <input>.dlq
    instance: str | None = None
    # Output topics must exist unless this is set: a typo in a rule should not create a topic.
    create_topics: bool = False
    idle_s: float = Field(default=3.0, gt=0)
    kafka: KafkaTuning = KafkaTuning(batch_size=ROUTE_BATCH_SIZE)
    # The input topic's value format (docs/formats.md): routed records keep their own bytes.
    formats: FormatSettings = FormatSettings()

    @field_validator("kafka", mode="before")
    @classmethod
    def _route_batch(cls, value: Any) -> Any:
        """Tuning given without ``batch_size`` still gets route's batch size, not the core's."""
        if isinstance(value, dict) and "batch_size" not in value:
            return {**value, "batch_size": ROUTE_BATCH_SIZE}
        return value

    @property
    def dlq_topic(self) -> str:
        return self.dlq or f"{self.input}.dlq"

    def stream_settings(self, rules: RuleSet) -> StreamSettings:
        topics = rules.topics
        if not topics:
            raise ConfigError("Every rule (and the default) drops its records: there is nothing to route to.",
                              hint="Give at least one rule or the default a `to` topic.")
        for topic in (self.input, self.dlq_topic):
            if topic in topics:
                raise ConfigError(f"A rule routes to {topic!r}, the router's input or dead-letter topic.",
                                  hint="Route to other topics; records would loop or mix with dead letters.")
        # The DLQ is created when missing; output topics were checked before (check_outputs).
        return StreamSettings(inputs=(self.input,), outputs=topics, group=self.group,
                              dlq_topic=self.dlq_topic, instance=self.instance, create_topics=True,
                              idle_s=self.idle_s, kafka=self.kafka)


def route_settings(**values: Any) -> RouteSettings:
    """:class:`RouteSettings` from flags (``None`` values dropped), as one :class:`ConfigError`."""
    try:
        return RouteSettings(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise invalid_settings(exc, what="route settings") from None


@dataclass(frozen=True)
class RouteStats(StreamStats):
    """The core's counts plus, per rule, the records it took (``default``: the unmatched)."""

    by_rule: dict[str, int] = field(default_factory=dict)
    dropped: int = 0

    @property
    def balanced(self) -> bool:
        """in = routed + dropped + dead-lettered."""
        return self.records_in == sum(self.records_out.values()) + self.dropped + self.dead_lettered

    def as_dict(self) -> dict[str, Any]:
        return super().as_dict() | {"by_rule": dict(self.by_rule), "dropped": self.dropped,
                                    "balanced": self.balanced}


class RouteStage(Stage[RouteStats]):
    """The rules engine, with per-rule totals that count only committed batches."""

    name = "route"

    def __init__(self, rules: RuleSet, formats: FormatSettings | None = None) -> None:
        self.router = Router(rules, Decoders(formats))
        self.by_rule: Counter[str] = Counter({r.name: 0 for r in rules.rules})
        if rules.default is not None:
            self.by_rule[DEFAULT_RULE] = 0
        self.dropped = 0

    def process(self, records: Sequence[Record]) -> RouteBatch:
        return self.router.run(records)

    def committed(self, result: BatchResult) -> None:
        assert isinstance(result, RouteBatch)  # what process() returned
        self.by_rule.update(result.by_rule)
        self.dropped += result.dropped
        for rule, n in result.by_rule.items():
            m.ROUTED.labels(stage=self.name, rule=rule).inc(n)

    def report(self, stats: StreamStats) -> RouteStats:
        return RouteStats(**{f.name: getattr(stats, f.name) for f in fields(StreamStats)},
                          by_rule=dict(self.by_rule), dropped=self.dropped)


def check_outputs(connection: ConnectionSettings, settings: RouteSettings, rules: RuleSet) -> None:
    """Every topic a rule names exists (unless ``create_topics``); raises :class:`ConfigError`."""
    if settings.create_topics:
        return
    from kafeed.topics import TopicAdmin

    admin = TopicAdmin(connection)
    for topic in rules.topics:
        if not admin.exists(topic):
            who = [r.name for r in rules.rules if r.to == topic] or ["default"]
            raise ConfigError(f"Rule {who[0]!r} routes to topic {topic!r}, which does not exist.",
                              hint=f"Create it with `kafeed topic create {topic}`, or pass --create-topics.")


def run_route(
    settings: RouteSettings, rules: RuleSet, connection: ConnectionSettings, *, until_caught_up: bool = False,
    stop_event: threading.Event | None = None, on_progress: Callable[[RouteStats], None] | None = None,
) -> RouteStats:
    """Route until ``stop_event`` is set (or, with ``until_caught_up``, until idle at the end)."""
    stream = settings.stream_settings(rules)
    check_outputs(connection, settings, rules)
    processor = StreamProcessor(RouteStage(rules, settings.formats), stream, connection,
                                stop_event=stop_event, on_progress=on_progress)
    with young_collections_per_batch(stream.kafka.batch_size):
        return processor.run(until_caught_up=until_caught_up)


@contextmanager
def young_collections_per_batch(batch_size: int) -> Iterator[None]:
    """Raise the collector's young-generation threshold to a few batches while inside.

    A batch keeps tens of thousands of small tuples (records, outputs) alive until it
    commits; at the default threshold (700 allocations) the collector scans them again and
    again, which took a fifth of the router's time on the benchmark. They hold no cycles,
    so collecting less often changes nothing but that time.
    """
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 5 * batch_size), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
